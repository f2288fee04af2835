// lowp: low-precision numerics for large-model work.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "io/input_files.h"
#include "io/output_file.h"

namespace lowp::cli {
namespace {

constexpr char kUsage[] =
    "usage: lowp <command> [options]\n"
    "\n"
    "What a number format does to your numbers.\n"
    "\n"
    "commands:\n"
    "  formats      list the format catalog (--json for every field)\n"
    "  tensors      list the tensors of checkpoint files (safetensors, GGUF, .npy)\n"
    "  convert      convert a raw file of codes from one format to another\n"
    "  schemes      list the quantization schemes and their exact rules\n"
    "  quant-error  quantize checkpoint tensors and report the error per scheme\n"
    "  quantize     write a checkpoint's tensors quantized and dequantized\n"
    "  range        what fp16/bf16/fp8 ranges do to each tensor; loss scales\n"
    "  size         memory to train or serve a model, per component and device\n"
    "  devices      list the device catalog (memory, bandwidth, datasheet)\n"
    "  plan         per weight format: memory and devices beside measured error\n"
    "  eval         what emulated formats do to the model's outputs: KL, top-1, perplexity\n"
    "  tokenize     a model's tokenizer on a text file: ids, pieces, counts\n"
    "  mix          per-tensor types that fit a budget, chosen by measured loss\n"
    "  imatrix      llama.cpp's importance matrix of a model over calibration text\n"
    "  update-error what training-state formats do to AdamW's updates, per recipe\n"
    "\n"
    "'lowp <command> --help' describes a command.\n";

int Main(int argc, char** argv) {
  // One run, one operation: no output of it replaces a file it reads.
  const InputScope scope;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  const bool wants_help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
  if (command == "formats") {
    if (wants_help) return std::fputs(kFormatsHelp, stdout), 0;
    return FormatsCommand(args);
  }
  if (command == "convert") {
    if (wants_help) return std::fputs(kConvertHelp, stdout), 0;
    return ConvertCommand(args);
  }
  struct {
    const char* name;
    const char* help;
    int (*run)(const std::vector<std::string>&);
  } const commands[] = {{"schemes", kSchemesHelp, SchemesCommand},
                        {"quant-error", kQuantErrorHelp, QuantErrorCommand},
                        {"quantize", kQuantizeHelp, QuantizeCommand},
                        {"range", kRangeHelp, RangeCommand},
                        {"size", kSizeHelp, SizeCommand},
                        {"devices", kDevicesHelp, DevicesCommand},
                        {"plan", kPlanHelp, PlanCommand},
                        {"eval", kEvalHelp, EvalCommand},
                        {"tensors", kTensorsHelp, TensorsCommand},
                        {"tokenize", kTokenizeHelp, TokenizeCommand},
                        {"mix", kMixHelp, MixCommand},
                        {"imatrix", kImatrixHelp, ImatrixCommand},
                        {"update-error", kUpdateErrorHelp, UpdateErrorCommand}};
  for (const auto& c : commands) {
    if (command != c.name) continue;
    if (wants_help) return std::fputs(c.help, stdout), 0;
    return c.run(args);
  }
  std::fprintf(stderr, "lowp: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}

}  // namespace

}  // namespace lowp::cli

int main(int argc, char** argv) {
  // Interrupted, lowp leaves no temporary behind (io/output_file.h).
  lowp::RemoveOutputsOnSignals();
  return lowp::cli::Main(argc, argv);
}
