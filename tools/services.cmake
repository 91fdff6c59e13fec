# Libraries for `splitspec generate-remote` / `splitspec generate --router` (tools/cmd_generate_remote.cc).
target_link_libraries(splitspec PRIVATE splitspec_rpc)
