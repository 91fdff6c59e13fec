# Third-party libraries, all from Debian 12 packages (see README for the apt line).
find_package(absl CONFIG REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(benchmark CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(OpenMP REQUIRED)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
# Unicode categories and normalization forms for tokenizer.json (common/engine/tokenizer/hf).
pkg_check_modules(ICU_UC REQUIRED IMPORTED_TARGET icu-uc)
