# `splitspec profile` (tools/cmd_profile.cc): the grid measurements and the latency-model fit,
# over the router core's latency model and the worker clients.
target_sources(splitspec PRIVATE ${CMAKE_CURRENT_LIST_DIR}/profile_grid.cc ${CMAKE_CURRENT_LIST_DIR}/profile_fit.cc)
target_link_libraries(splitspec PRIVATE splitspec_router_core splitspec_rpc)
