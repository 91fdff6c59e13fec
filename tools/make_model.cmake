# Libraries for `splitspec make-model` (tools/cmd_make_model.cc).
target_link_libraries(splitspec PRIVATE splitspec_model_maker)
