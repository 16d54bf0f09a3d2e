#pragma once
// Private: the YAML spelling of every choice value, and the LLaMA-Factory values the engine refuses.
#include <string_view>
#include <utility>
#include <vector>

#include "studio/config/run_config.h"

namespace studio::detail {

template <typename E>
struct EnumInfo;

#define STUDIO_ENUM_INFO(E, REFUSED_WHY, ...)                                          \
  template <>                                                                          \
  struct EnumInfo<E> {                                                                 \
    static const std::vector<std::pair<E, std::string_view>>& names() {                \
      static const std::vector<std::pair<E, std::string_view>> v = {__VA_ARGS__};      \
      return v;                                                                        \
    }                                                                                  \
    static constexpr std::string_view refused_why = REFUSED_WHY;                       \
    static const std::vector<std::string_view>& refused();                             \
  };

STUDIO_ENUM_INFO(Stage, "studio-train trains the pt, sft and dpo stages",
                 {Stage::Sft, "sft"}, {Stage::Dpo, "dpo"}, {Stage::Pt, "pt"}, {Stage::Rm, "rm"}, {Stage::Kto, "kto"})
STUDIO_ENUM_INFO(FinetuningType,
                 "OFT adapters are not implemented in studio-train; use lora, freeze or full, or "
                 "LLaMA-Factory for OFT",
                 {FinetuningType::Full, "full"}, {FinetuningType::Lora, "lora"},
                 {FinetuningType::Freeze, "freeze"})
STUDIO_ENUM_INFO(LrScheduler, "", {LrScheduler::Linear, "linear"}, {LrScheduler::Cosine, "cosine"},
                 {LrScheduler::Constant, "constant"},
                 {LrScheduler::ConstantWithWarmup, "constant_with_warmup"},
                 {LrScheduler::CosineWithMinLr, "cosine_with_min_lr"})
STUDIO_ENUM_INFO(FlashAttn, "", {FlashAttn::Auto, "auto"}, {FlashAttn::Fa2, "fa2"},
                 {FlashAttn::Sdpa, "sdpa"}, {FlashAttn::Disabled, "disabled"})
STUDIO_ENUM_INFO(PrefLoss,
                 "studio-train implements LLaMA-Factory's preference losses sigmoid, ipo, hinge, "
                 "orpo, simpo and kto_pair",
                 {PrefLoss::Sigmoid, "sigmoid"}, {PrefLoss::Ipo, "ipo"},
                 {PrefLoss::Hinge, "hinge"}, {PrefLoss::Orpo, "orpo"},
                 {PrefLoss::Simpo, "simpo"}, {PrefLoss::KtoPair, "kto_pair"})
STUDIO_ENUM_INFO(EvalStrategy, "", {EvalStrategy::No, "no"}, {EvalStrategy::Steps, "steps"},
                 {EvalStrategy::Epoch, "epoch"})
STUDIO_ENUM_INFO(SpMode, "", {SpMode::ZigzagRing, "zigzag-ring"}, {SpMode::Ulysses, "ulysses"},
                 {SpMode::Usp, "usp"})
STUDIO_ENUM_INFO(Batching, "", {Batching::Normal, "normal"}, {Batching::PaddingFree, "padding_free"},
                 {Batching::Dynamic, "dynamic_batching"},
                 {Batching::DynamicPaddingFree, "dynamic_padding_free"})
#undef STUDIO_ENUM_INFO

template <typename E>
std::string_view enum_name(E v) {
  for (const auto& [value, name] : EnumInfo<E>::names())
    if (value == v) return name;
  return "?";
}

template <typename E>
std::string enum_allowed() {
  std::string out;
  for (const auto& entry : EnumInfo<E>::names()) {
    if (!out.empty()) out += " | ";
    out += entry.second;
  }
  return out;
}

}  // namespace studio::detail
