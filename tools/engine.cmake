# Libraries for the engine-running subcommands' --device flag (tools/engine_device.h).
target_link_libraries(splitspec PRIVATE splitspec_backends)
