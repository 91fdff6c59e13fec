# Router libraries the `splitspec` CLI needs (simulate).
target_link_libraries(splitspec PRIVATE splitspec_router_sim)
