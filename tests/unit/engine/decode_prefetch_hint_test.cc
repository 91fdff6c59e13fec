// Which CPUs decode asks for non-temporal weight lines on (matmul_parts.h): the CPU family read
// through cpuid against the kernel's own reading of it in /proc/cpuinfo.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/engine/cpu/matmul_parts.h"

namespace splitspec::engine::cpu {
namespace {

// The first processor's "vendor_id" and "cpu family" from /proc/cpuinfo; false where it has
// none.
bool KernelsCpuFamily(std::string* vendor, unsigned* family) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  bool have_vendor = false, have_family = false;
  for (std::string line; std::getline(cpuinfo, line) && !(have_vendor && have_family);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id" && !have_vendor) {
      *vendor = value;
      have_vendor = true;
    } else if (key == "cpu family" && !have_family) {
      *family = static_cast<unsigned>(std::stoul(value));
      have_family = true;
    }
  }
  return have_vendor && have_family;
}

TEST(DecodePrefetchHintTest, AmdFamilyAgreesWithTheKernel) {
  // Without an x86 vendor and family (another architecture) no family is AMD's.
  std::string vendor = "none";
  unsigned family = 0;
  const bool amd = KernelsCpuFamily(&vendor, &family) && vendor == "AuthenticAMD";
  for (unsigned f : {23u, 25u, 26u, family, family + 1}) {
    EXPECT_EQ(IsAmdFamily(f), amd && f == family) << vendor << " family " << family << ", asked " << f;
  }
  const PrefetchHint expected = amd && family == 26 ? PrefetchHint::kNonTemporal : PrefetchHint::kL2;
  EXPECT_EQ(DecodePrefetchHint(), expected);
}

}  // namespace
}  // namespace splitspec::engine::cpu
