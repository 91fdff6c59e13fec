# Libraries for `splitspec profile` (tools/cmd_profile.cc): the latency-model fit of the router
# core and the worker clients.
target_link_libraries(splitspec PRIVATE splitspec_router_core splitspec_rpc)
