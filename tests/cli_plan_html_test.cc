// lowp plan --html: the report is well-formed XML, self-contained, and has
// one chart entry per candidate; user text is escaped; a failed run leaves
// no file behind.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

const std::vector<std::string> kDefaultFormats = {"bf16", "fp8_e4m3fn", "int8-channel", "int4-g128",
                                                  "nf4",  "mxfp4",      "q4_0"};

// A fresh directory of the test's own (ctest runs tests in parallel).
std::filesystem::path FreshDirectory() {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      (std::string("lowp_plan_html_") +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The plan of the README's example, with `extra` options; the report's text.
std::string Report(const std::string& extra) {
  const std::filesystem::path html = FreshDirectory() / "report.html";
  const Result r =
      RunLowp("plan --model llama-3.1-8b --mode inference --quiet " +
              std::string("--device rtx-4090,h100-sxm --html ") + html.string() + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return ReadFile(html);
}

// Whether `text` at `i` starts an entity XML knows without a DTD.
bool EntityAt(const std::string& text, size_t i) {
  static const std::regex entity("&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
  return std::regex_search(text.begin() + i, text.end(), entity,
                           std::regex_constants::match_continuous);
}

// An XML well-formedness check, enough for what the report uses: after the
// doctype, one root element; tags balance and nest; attribute values are
// double-quoted; no '<' or stray '&' in text or values.
::testing::AssertionResult WellFormed(const std::string& doc) {
  const std::string doctype = "<!DOCTYPE html>\n";
  if (doc.compare(0, doctype.size(), doctype) != 0) {
    return ::testing::AssertionFailure() << "no doctype first";
  }
  std::vector<std::string> open;
  int roots = 0;
  size_t i = doctype.size();
  auto fail = [&](const std::string& what) {
    return ::testing::AssertionFailure()
           << what << " at offset " << i << ": ..." << doc.substr(i < 40 ? 0 : i - 40, 80) << "...";
  };
  auto name_at = [&]() {
    const size_t start = i;
    while (i < doc.size() && (std::isalnum(static_cast<unsigned char>(doc[i])) || doc[i] == '-' ||
                              doc[i] == ':' || doc[i] == '_')) {
      ++i;
    }
    return doc.substr(start, i - start);
  };
  auto skip_space = [&]() {
    while (i < doc.size() && std::isspace(static_cast<unsigned char>(doc[i]))) ++i;
  };
  while (i < doc.size()) {
    if (doc[i] == '&') {
      if (!EntityAt(doc, i)) return fail("stray '&' in text");
      ++i;
    } else if (doc.compare(i, 2, "</") == 0) {
      i += 2;
      const std::string name = name_at();
      if (open.empty() || open.back() != name) return fail("unmatched </" + name + ">");
      open.pop_back();
      skip_space();
      if (i >= doc.size() || doc[i] != '>') return fail("bad end tag");
      ++i;
    } else if (doc[i] == '<') {
      ++i;
      const std::string name = name_at();
      if (name.empty()) return fail("'<' in text");
      if (open.empty() && ++roots > 1) return fail("a second root element");
      for (;;) {
        skip_space();
        if (doc.compare(i, 2, "/>") == 0) {
          i += 2;
          break;
        }
        if (i < doc.size() && doc[i] == '>') {
          open.push_back(name);
          ++i;
          break;
        }
        if (name_at().empty()) return fail("bad attribute name in <" + name + ">");
        if (doc.compare(i, 2, "=\"") != 0) return fail("attribute value not double-quoted");
        for (i += 2; i < doc.size() && doc[i] != '"'; ++i) {
          if (doc[i] == '<') return fail("'<' in an attribute value");
          if (doc[i] == '&' && !EntityAt(doc, i)) return fail("stray '&' in an attribute value");
        }
        if (i >= doc.size()) return fail("unterminated attribute value");
        ++i;
      }
    } else {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(doc[i]))) {
        return fail("text outside the root element");
      }
      ++i;
    }
  }
  if (!open.empty()) return fail("<" + open.back() + "> never closed");
  if (roots != 1) return fail("no root element");
  return ::testing::AssertionSuccess();
}

// The data-format of each <g class="css_class"> in order.
std::vector<std::string> Entries(const std::string& doc, const std::string& css_class) {
  const std::regex g("<g class=\"" + css_class + "\" data-format=\"([^\"]*)\">");
  std::vector<std::string> formats;
  for (std::sregex_iterator it(doc.begin(), doc.end(), g), end; it != end; ++it) {
    formats.push_back((*it)[1]);
  }
  return formats;
}

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(PlanHtml, CheckerCatchesMalformedDocuments) {
  const std::string ok = "<!DOCTYPE html>\n<html a=\"1 &amp; 2\"><p>x &lt; y</p><br/></html>\n";
  EXPECT_TRUE(WellFormed(ok));
  for (const char* bad :
       {"<html><p>x < y</p></html>", "<html><p>R&D</p></html>", "<html><p></html>",
        "<html><p></b></p></html>", "<html a=1></html>", "<html a=\"<\"></html>",
        "<html a=\"&x\"></html>", "<html></html><html></html>", "<html>", "<html></html>x"}) {
    EXPECT_FALSE(WellFormed(std::string("<!DOCTYPE html>\n") + bad)) << bad;
  }
  EXPECT_FALSE(WellFormed("<html></html>"));
}

TEST(PlanHtml, ReportIsWellFormedWithOneEntryPerCandidate) {
  const std::string doc = Report("");
  EXPECT_TRUE(WellFormed(doc));
  EXPECT_THAT(Entries(doc, "bar"), ElementsAreArray(kDefaultFormats));
  // The points in any order (the Pareto-optimal ones are drawn first).
  EXPECT_THAT(Entries(doc, "point"), UnorderedElementsAreArray(kDefaultFormats));
  EXPECT_EQ(Count(doc, "<svg "), 2);
  EXPECT_EQ(Count(doc, "<table>"), 2);
  // Each device's capacity line, labelled, and the legend's sample line.
  EXPECT_EQ(Count(doc, "class=\"capacity\""), 3);
  const std::string memory_chart = doc.substr(0, doc.find("</svg>"));
  EXPECT_THAT(memory_chart, HasSubstr(">rtx-4090</text>"));
  EXPECT_THAT(memory_chart, HasSubstr(">24.00 GB</text>"));
  EXPECT_THAT(memory_chart, HasSubstr(">h100-sxm</text>"));
  EXPECT_THAT(memory_chart, HasSubstr(">80.00 GB</text>"));
  EXPECT_THAT(doc, HasSubstr("<title>lowp plan: llama-3.1-8b, inference</title>"));
}

TEST(PlanHtml, ReportIsSelfContained) {
  const std::string doc = Report("");
  std::string lower = doc;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  EXPECT_THAT(lower, Not(HasSubstr("<script")));
  EXPECT_FALSE(std::regex_search(lower, std::regex("\\son[a-z]+=")));  // event handlers
  EXPECT_THAT(lower, Not(HasSubstr("src=")));
  EXPECT_THAT(lower, Not(HasSubstr("href=")));
  EXPECT_THAT(lower, Not(HasSubstr("url(")));
  EXPECT_THAT(lower, Not(HasSubstr("@import")));
  // Addresses only as namespace names, never fetched.
  const std::regex address("(xmlns=\")?(https?://[^\"]*)");
  std::vector<std::string> addresses;
  for (std::sregex_iterator it(lower.begin(), lower.end(), address), end; it != end; ++it) {
    if (!(*it)[2].matched) continue;
    EXPECT_TRUE((*it)[1].matched) << (*it)[2] << " outside xmlns";
    addresses.push_back((*it)[2]);
  }
  EXPECT_THAT(addresses, ElementsAre("http://www.w3.org/1999/xhtml", "http://www.w3.org/2000/svg",
                                     "http://www.w3.org/2000/svg"));
}

TEST(PlanHtml, GivenFormatsAreTheEntries) {
  const std::string doc = Report("--formats int4-g128,bf16,nf4");
  EXPECT_TRUE(WellFormed(doc));
  EXPECT_THAT(Entries(doc, "bar"), ElementsAre("int4-g128", "bf16", "nf4"));
  EXPECT_THAT(Entries(doc, "point"), UnorderedElementsAre("int4-g128", "bf16", "nf4"));
}

TEST(PlanHtml, ProxyAccuracyIsSaid) {
  const std::string doc = Report("");
  EXPECT_THAT(doc, HasSubstr("<p class=\"proxy\"><b>The accuracy is a proxy:</b> measured on "
                             "tensors that are not llama-3.1-8b's linear layers"));
}

// The model named by a config.json path that needs escaping, measured on
// its own tensors (stories260K's shapes), copied to a path that needs it too.
TEST(PlanHtml, UserTextIsEscaped) {
  const std::filesystem::path dir = FreshDirectory();
  const std::string special = "a&b<c>\"d";
  const std::filesystem::path config = dir / (special + ".json");
  std::ofstream(config) << R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,
      "num_key_value_heads": 4, "vocab_size": 512, "max_position_embeddings": 512,
      "tie_word_embeddings": true})";
  const std::filesystem::path tensors = dir / (special + ".safetensors");
  std::filesystem::copy_file(
      std::filesystem::path(LOWP_TEST_DATA_DIR) / "stories260K/stories260K.f32.safetensors",
      tensors);
  const std::filesystem::path html = dir / (special + ".html");
  const Result r = RunLowp("plan --mode inference --seq 256 --device rtx-4090 --quiet " +
                           std::string("--formats bf16,q4_0 --model '") + config.string() +
                           "' --tensors '" + tensors.string() + "' --html '" + html.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string doc = ReadFile(html);
  EXPECT_TRUE(WellFormed(doc));
  EXPECT_THAT(doc, Not(HasSubstr(special)));
  const std::string escaped = "a&amp;b&lt;c&gt;&quot;d";
  EXPECT_THAT(doc, HasSubstr("<title>lowp plan: " + dir.string() + "/" + escaped + ".json, "));
  EXPECT_THAT(doc, HasSubstr(dir.string() + "/" + escaped + ".safetensors"));
  EXPECT_THAT(doc, Not(HasSubstr("class=\"proxy\"")));
  EXPECT_THAT(Entries(doc, "bar"), ElementsAre("bf16", "q4_0"));
}

TEST(PlanHtml, FailedRunLeavesNothing) {
  const std::filesystem::path dir = FreshDirectory();
  Result r = RunLowp("plan --model llama-3.1-8b --mode inference --quiet --formats nosuch --html " +
                     (dir / "report.html").string());
  EXPECT_NE(r.exit_code, 0);
  // Written, then not renamed: the path is a directory.
  std::filesystem::create_directory(dir / "taken.html");
  r = RunLowp("plan --model llama-3.1-8b --mode inference --quiet --html " +
              (dir / "taken.html").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("taken.html"));
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(left, ElementsAre("taken.html"));
  EXPECT_TRUE(std::filesystem::is_empty(dir / "taken.html"));
}

}  // namespace
}  // namespace lowp
