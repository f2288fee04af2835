#include "optim/recipe.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace lowp {
namespace {

Format MustFind(absl::string_view name) { return *FindFormat(name); }

absl::string_view UpdateName(TrainingRecipe::Update u) {
  switch (u) {
    case TrainingRecipe::Update::kNearestEven:
      return "rne";
    case TrainingRecipe::Update::kStochastic:
      return "sr";
    case TrainingRecipe::Update::kKahan:
      return "kahan";
  }
  return "";
}

absl::string_view MomentsName(TrainingRecipe::Moments m) {
  switch (m) {
    case TrainingRecipe::Moments::kFp32:
      return "fp32";
    case TrainingRecipe::Moments::kBf16:
      return "bf16";
    case TrainingRecipe::Moments::kFp8Blocks:
      return "fp8";
    case TrainingRecipe::Moments::kDynamic8:
      return "8bit";
  }
  return "";
}

TrainingRecipe Make(std::string name, std::string description, absl::string_view weights,
                    bool master, TrainingRecipe::Update update, absl::string_view grads,
                    TrainingRecipe::Moments moments) {
  TrainingRecipe r;
  r.name = std::move(name);
  r.description = std::move(description);
  r.weights = MustFind(weights);
  r.master = master;
  r.update = update;
  r.grads = MustFind(grads);
  r.moments = moments;
  return r;
}

absl::Status RecipeError(absl::string_view recipe, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("recipe '", recipe, "': ", why));
}

}  // namespace

std::string TrainingRecipe::Spelling() const {
  return absl::StrCat("weights=", weights.name, "+master=", master ? "fp32" : "none",
                      "+update=", UpdateName(update), "+grads=", grads.name,
                      "+moments=", MomentsName(moments));
}

double TrainingRecipe::BytesPerParameter() const {
  double bytes = weights.bits / 8.0 + grads.bits / 8.0;
  if (master) bytes += 4;
  if (!master && update == Update::kKahan) bytes += weights.bits / 8.0;
  switch (moments) {
    case Moments::kFp32:
      bytes += 8;
      break;
    case Moments::kBf16:
      bytes += 4;
      break;
    case Moments::kFp8Blocks:
    case Moments::kDynamic8:
      bytes += 2 + 2 * 4.0 / 256;
      break;  // + a float32 per 256 each
  }
  return bytes;
}

bool TrainingRecipe::ScaledGradients() const { return grads.bits < 16 || grads.name == "fp16"; }

const std::vector<TrainingRecipe>& TrainingRecipes() {
  using U = TrainingRecipe::Update;
  using M = TrainingRecipe::Moments;
  static const auto* recipes = new std::vector<TrainingRecipe>{
      Make("fp32", "everything in float32", "fp32", false, U::kNearestEven, "fp32", M::kFp32),
      Make("fp32-master", "mixed precision: bf16 weights and gradients, fp32 master and moments",
           "bf16", true, U::kNearestEven, "bf16", M::kFp32),
      Make("fp16-master", "fp16 weights and loss-scaled fp16 gradients, fp32 master and moments",
           "fp16", true, U::kNearestEven, "fp16", M::kFp32),
      Make("fp8-grads", "fp32-master with fp8 e5m2 gradients, scaled per tensor", "bf16", true,
           U::kNearestEven, "fp8_e5m2", M::kFp32),
      Make("bf16-kahan", "bf16 weights updated by Kahan summation (a bf16 buffer), no master",
           "bf16", false, U::kKahan, "bf16", M::kFp32),
      Make("bf16-rne", "bf16 weights, no master: updates rounded to nearest", "bf16", false,
           U::kNearestEven, "bf16", M::kFp32),
      Make("bf16-sr", "bf16 weights, no master: updates stochastically rounded", "bf16", false,
           U::kStochastic, "bf16", M::kFp32),
      Make("fp32-master-8bit", "fp32-master with bitsandbytes' 8-bit blockwise moments", "bf16",
           true, U::kNearestEven, "bf16", M::kDynamic8),
      Make("fp32-master-fp8-moments", "fp32-master with e4m3 moments scaled per 256", "bf16", true,
           U::kNearestEven, "bf16", M::kFp8Blocks),
      Make("bf16-sr-bf16-moments", "bf16 weights with SR, bf16 moments", "bf16", false,
           U::kStochastic, "bf16", M::kBf16),
      Make("bf16-kahan-8bit", "bf16 weights with Kahan summation, 8-bit moments", "bf16", false,
           U::kKahan, "bf16", M::kDynamic8),
      Make("bf16-rne-8bit", "bf16 weights rounded to nearest, 8-bit moments", "bf16", false,
           U::kNearestEven, "bf16", M::kDynamic8),
      Make("bf16-sr-8bit", "bf16 weights with SR, 8-bit moments", "bf16", false, U::kStochastic,
           "bf16", M::kDynamic8),
  };
  return *recipes;
}

absl::StatusOr<TrainingRecipe> ParseTrainingRecipe(absl::string_view name) {
  for (const TrainingRecipe& r : TrainingRecipes()) {
    if (r.name == name) return r;
  }
  if (name.find('=') == absl::string_view::npos) {
    std::vector<std::string> names;
    for (const TrainingRecipe& r : TrainingRecipes()) names.push_back(r.name);
    return RecipeError(name, absl::StrCat("unknown; named recipes: ", absl::StrJoin(names, ", "),
                                          ", or KEY=VALUE items joined by '+'"));
  }
  TrainingRecipe r;
  r.name = std::string(name);
  r.description = "custom";
  r.grads = MustFind("fp32");
  bool has_weights = false, has_grads = false;
  std::vector<std::string> seen;
  for (absl::string_view item : absl::StrSplit(name, '+')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const auto& [key, value] = kv;
    for (const std::string& s : seen) {
      if (s == key) return RecipeError(name, absl::StrCat("'", key, "' given twice"));
    }
    seen.push_back(key);
    if (key == "weights") {
      if (value != "fp32" && value != "bf16" && value != "fp16") {
        return RecipeError(name, absl::StrCat("weights=", value, "; valid: fp32, bf16, fp16"));
      }
      r.weights = MustFind(value);
      has_weights = true;
    } else if (key == "master") {
      if (value != "none" && value != "fp32") {
        return RecipeError(name, absl::StrCat("master=", value, "; valid: none, fp32"));
      }
      r.master = value == "fp32";
    } else if (key == "update") {
      if (value == "rne") {
        r.update = TrainingRecipe::Update::kNearestEven;
      } else if (value == "sr") {
        r.update = TrainingRecipe::Update::kStochastic;
      } else if (value == "kahan") {
        r.update = TrainingRecipe::Update::kKahan;
      } else {
        return RecipeError(name, absl::StrCat("update=", value, "; valid: rne, sr, kahan"));
      }
    } else if (key == "grads") {
      if (value != "fp32" && value != "bf16" && value != "fp16" && value != "fp8_e4m3fn" &&
          value != "fp8_e5m2") {
        return RecipeError(
            name, absl::StrCat("grads=", value, "; valid: fp32, bf16, fp16, fp8_e4m3fn, fp8_e5m2"));
      }
      r.grads = MustFind(value);
      has_grads = true;
    } else if (key == "moments") {
      if (value == "fp32") {
        r.moments = TrainingRecipe::Moments::kFp32;
      } else if (value == "bf16") {
        r.moments = TrainingRecipe::Moments::kBf16;
      } else if (value == "fp8") {
        r.moments = TrainingRecipe::Moments::kFp8Blocks;
      } else if (value == "8bit") {
        r.moments = TrainingRecipe::Moments::kDynamic8;
      } else {
        return RecipeError(name, absl::StrCat("moments=", value, "; valid: fp32, bf16, fp8, 8bit"));
      }
    } else {
      return RecipeError(name, absl::StrCat("unknown key '", key,
                                            "'; valid: weights, master, update, grads, moments"));
    }
  }
  if (!has_weights) return RecipeError(name, "names no weights format (weights=fp32|bf16|fp16)");
  if (!has_grads) r.grads = r.weights;
  if (r.master && r.update != TrainingRecipe::Update::kNearestEven) {
    return RecipeError(name, "update=sr or kahan applies to weights without a master copy");
  }
  return r;
}

}  // namespace lowp
