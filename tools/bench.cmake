# Libraries for `splitspec bench` (tools/cmd_bench.cc). splitspec_bench_core (workloads, arrival
# process, statistics, reports) has no gRPC so its unit tests link fast; splitspec_bench adds the
# router client and the load runner.
add_library(splitspec_bench_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/bench_workload.cc
  ${CMAKE_CURRENT_LIST_DIR}/bench_arrivals.cc
  ${CMAKE_CURRENT_LIST_DIR}/bench_stats.cc
  ${CMAKE_CURRENT_LIST_DIR}/bench_report.cc)
target_include_directories(splitspec_bench_core PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(splitspec_bench_core PUBLIC absl::status absl::statusor absl::strings absl::str_format
  nlohmann_json::nlohmann_json)

add_library(splitspec_bench STATIC
  ${CMAKE_CURRENT_LIST_DIR}/bench_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/bench_progress.cc
  ${CMAKE_CURRENT_LIST_DIR}/bench_runner.cc)
target_link_libraries(splitspec_bench PUBLIC splitspec_bench_core splitspec_rpc splitspec_sampling absl::time Threads::Threads)

target_link_libraries(splitspec PRIVATE splitspec_bench)
