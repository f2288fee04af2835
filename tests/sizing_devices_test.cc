// The device catalog and the byte and bandwidth parsers: exact byte counts,
// aliases, user-defined devices, and every malformed input rejected with a
// message naming what was being parsed.
#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sizing/devices.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

TEST(DeviceCatalog, DatasheetFigures) {
  struct Expected {
    const char* name;
    int64_t memory_bytes;
    double bandwidth;
  };
  // GB = 10^9 bytes, as the datasheets mean it.
  const Expected expected[] = {
      {"h100-sxm", 80'000'000'000, 3.35e12},   {"h100-pcie", 80'000'000'000, 2.0e12},
      {"h100-nvl", 94'000'000'000, 3.9e12},    {"h200", 141'000'000'000, 4.8e12},
      {"a100-40gb", 40'000'000'000, 1.555e12}, {"a100-80gb", 80'000'000'000, 2.039e12},
      {"b200", 180'000'000'000, 8.0e12},       {"mi300x", 192'000'000'000, 5.3e12},
      {"mi325x", 256'000'000'000, 6.0e12},     {"l40s", 48'000'000'000, 864e9},
      {"rtx-4090", 24'000'000'000, 1008e9},
  };
  ASSERT_EQ(DeviceCatalog().size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    const Device& d = DeviceCatalog()[i];
    EXPECT_EQ(d.name, expected[i].name);
    EXPECT_EQ(d.memory_bytes, expected[i].memory_bytes) << d.name;
    EXPECT_EQ(d.bandwidth_bytes_per_s, expected[i].bandwidth) << d.name;
    EXPECT_FALSE(d.description.empty()) << d.name;
    EXPECT_FALSE(d.source.empty()) << d.name;
  }
}

TEST(DeviceCatalog, NamesAreUniqueAndFound) {
  std::set<std::string> names;
  for (const Device& d : DeviceCatalog()) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    absl::StatusOr<Device> found = FindDevice(d.name);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->name, d.name);
  }
}

TEST(FindDevice, AliasesAndCase) {
  EXPECT_EQ(FindDevice("h100")->name, "h100-sxm");
  EXPECT_EQ(FindDevice("H100")->name, "h100-sxm");
  EXPECT_EQ(FindDevice("a100")->name, "a100-80gb");
  EXPECT_EQ(FindDevice("4090")->name, "rtx-4090");
  EXPECT_EQ(FindDevice("RTX-4090")->name, "rtx-4090");
  EXPECT_EQ(FindDevice(" MI300X ")->name, "mi300x");
  EXPECT_EQ(FindDevice("H100-SXM")->memory_bytes, 80'000'000'000);
}

TEST(FindDevice, UnknownListsTheCatalog) {
  absl::StatusOr<Device> d = FindDevice("h300");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("unknown device 'h300'"));
  EXPECT_THAT(d.status().message(), HasSubstr("h100-sxm"));
  EXPECT_THAT(d.status().message(), HasSubstr("NAME:MEMORY[:BANDWIDTH]"));
  EXPECT_FALSE(FindDevice("").ok());
}

TEST(FindDevice, UserDefined) {
  absl::StatusOr<Device> d = FindDevice("mygpu:96GB:4TB/s");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "mygpu");
  EXPECT_EQ(d->memory_bytes, 96'000'000'000);
  EXPECT_EQ(d->bandwidth_bytes_per_s, 4e12);
  EXPECT_FALSE(d->source.empty());

  d = FindDevice("Card:24GiB:1008GB/s");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "Card");  // as written
  EXPECT_EQ(d->memory_bytes, 25'769'803'776);
  EXPECT_EQ(d->bandwidth_bytes_per_s, 1008e9);

  d = FindDevice("small:512MiB");  // bandwidth unknown
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->memory_bytes, 536'870'912);
  EXPECT_EQ(d->bandwidth_bytes_per_s, 0);
}

TEST(FindDevice, UserDefinedErrorsNameThePart) {
  struct Case {
    const char* spec;
    const char* message;
  };
  const Case cases[] = {
      {"x:0GB", "memory"},          {"x:-1GB", "memory"},
      {"x:80XB", "memory"},         {"x:", "memory"},
      {"x:80GB:fast", "bandwidth"}, {"x:80GB:0TB/s", "bandwidth"},
      {"x:80GB:4TB", "bandwidth"},  {":80GB", "name"},
      {"a b:80GB", "name"},         {"x:80GB:4TB/s:9", "NAME:MEMORY[:BANDWIDTH]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Device> d = FindDevice(c.spec);
    ASSERT_FALSE(d.ok()) << c.spec;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.spec;
    EXPECT_THAT(d.status().message(), HasSubstr(c.message)) << c.spec;
    EXPECT_THAT(d.status().message(), HasSubstr(c.spec)) << c.spec;
  }
}

TEST(ParseBytes, ExactValues) {
  struct Case {
    const char* text;
    int64_t bytes;
  };
  const Case cases[] = {
      {"0", 0},
      {"1", 1},
      {"4096", 4096},
      {"80GB", 80'000'000'000},
      {"80 GB", 80'000'000'000},
      {" 80gb ", 80'000'000'000},
      {"80e9", 80'000'000'000},
      {"8E10", 80'000'000'000},
      {"0.08e12", 80'000'000'000},
      {"24GiB", 25'769'803'776},
      {"512MiB", 536'870'912},
      {"1.5TB", 1'500'000'000'000},
      {"1TiB", 1'099'511'627'776},
      {"0.5GiB", 536'870'912},
      {"0.25KiB", 256},
      {"2kB", 2000},
      {"2KB", 2000},
      {"1PB", 1'000'000'000'000'000},
      {"1PiB", 1'125'899'906'842'624},
      {"3.35e3B", 3350},
      {"1.000GB", 1'000'000'000},
      {"007MB", 7'000'000},
      {"9223372036854775807", INT64_MAX},
      {"9223372036854775807B", INT64_MAX},
      {"8191PiB", 8191 * 1'125'899'906'842'624LL},
      {"100000000000000000000e-5", 1'000'000'000'000'000},
  };
  for (const Case& c : cases) {
    absl::StatusOr<int64_t> bytes = ParseBytes(c.text, "--buffers");
    ASSERT_TRUE(bytes.ok()) << c.text << ": " << bytes.status();
    EXPECT_EQ(*bytes, c.bytes) << c.text;
  }
}

TEST(ParseBytes, RejectsWithTheNameAndText) {
  const char* bad[] = {
      "",
      "GB",
      "-1",
      "-1GB",
      "+1GB",
      "0.5B",
      "0.5",
      "1.5",
      "nan",
      "inf",
      "1e",
      "1e+",
      "1ee3",
      "80XB",
      "80 G B",
      "80Gb/s",
      "80G",
      "1..5GB",
      ".",
      "1.2.3",
      "0x10",
      "1e-1",
      "1e99999",
      "8192PiB",
      "9223372036854775808",
      "1e19",
      "10EB",
      "80GB extra",
      "1,000",
      "0.0000000001GiB",
      "1234567890123456789012345678901234567",
      "1 000",
  };
  for (const char* text : bad) {
    absl::StatusOr<int64_t> bytes = ParseBytes(text, "--buffers");
    ASSERT_FALSE(bytes.ok()) << "'" << text << "' gave " << *bytes;
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(bytes.status().message(), HasSubstr("--buffers")) << text;
    EXPECT_THAT(bytes.status().message(), HasSubstr(std::string("'") + text + "'")) << text;
  }
  EXPECT_THAT(ParseBytes("0.5B", "--buffers").status().message(), HasSubstr("whole number"));
  EXPECT_THAT(ParseBytes("1e19", "--buffers").status().message(), HasSubstr("2^63"));
  EXPECT_THAT(ParseBytes("80XB", "--buffers").status().message(), HasSubstr("unit"));
}

TEST(ParseBandwidth, Values) {
  struct Case {
    const char* text;
    double bytes_per_s;
  };
  const Case cases[] = {
      {"3.35TB/s", 3.35e12},      {"864GB/s", 864e9},      {"864 GB/s", 864e9},
      {"1008gb/s", 1008e9},       {"2.039TB/s", 2.039e12}, {"1TiB/s", 1099511627776.0},
      {"1.5GiB/s", 1610612736.0}, {"5e11B/s", 5e11},       {"3350000000000", 3.35e12},
      {"100MB/s", 1e8},           {"0.5KiB/s", 512},
  };
  for (const Case& c : cases) {
    absl::StatusOr<double> bw = ParseBandwidth(c.text, "bandwidth");
    ASSERT_TRUE(bw.ok()) << c.text << ": " << bw.status();
    EXPECT_EQ(*bw, c.bytes_per_s) << c.text;
  }
}

TEST(ParseBandwidth, RejectsWithTheNameAndText) {
  const char* bad[] = {"",    "TB/s",      "fast",      "-1TB/s", "0TB/s",
                       "0",   "4TB",       "4XB/s",     "4TB/h",  "nan",
                       "inf", "1e999TB/s", "1e-999B/s", "0.1B/s", "4 TB / s"};
  for (const char* text : bad) {
    absl::StatusOr<double> bw = ParseBandwidth(text, "device bandwidth");
    ASSERT_FALSE(bw.ok()) << "'" << text << "' gave " << *bw;
    EXPECT_EQ(bw.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(bw.status().message(), HasSubstr("device bandwidth")) << text;
    EXPECT_THAT(bw.status().message(), HasSubstr(std::string("'") + text + "'")) << text;
  }
}

}  // namespace
}  // namespace lowp
