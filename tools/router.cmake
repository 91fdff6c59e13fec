# Router libraries the `splitspec` CLI needs (simulate; generate streams text like the router).
target_link_libraries(splitspec PRIVATE splitspec_router_sim splitspec_text_stream)
