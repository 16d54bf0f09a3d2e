#include "studio/trainer/model/quant4_weight.h"

#include "studio/kernels/quant4_ref.h"

#include <cmath>
#include <stdexcept>
#include <string>

#if STUDIO_TRAINER_FUSED_KERNELS
#include "studio/kernels/quant4_torch.h"
#endif

namespace studio::trainer {

const torch::Tensor& bnb_dynamic_map() {
  static const torch::Tensor map = [] {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> parts;
    for (int i = 0; i < 7; ++i) {
      const auto b = torch::linspace(0.1, 1.0, (1 << i) + 1, torch::kFloat);
      const auto means = (b.narrow(0, 0, b.size(0) - 1) + b.narrow(0, 1, b.size(0) - 1)) / 2.0;
      const double scale = std::pow(10.0, i - 6);
      parts.push_back(means * scale);
      parts.push_back(means * -scale);
    }
    parts.push_back(torch::tensor({0.0f, 1.0f}));
    return std::get<0>(torch::cat(parts).sort()).contiguous();
  }();
  return map;
}

c10::intrusive_ptr<Quant4Weight> Quant4Weight::quantize(const torch::Tensor& w,
                                                         const Quant4Options& opt,
                                                         torch::Device device) {
  torch::NoGradGuard no_grad;
  auto q = c10::make_intrusive<Quant4Weight>();
  q->shape_ = w.sizes().vec();
  q->n_ = w.numel();
  q->opt_ = opt;
  const torch::Tensor host = w.detach().to(torch::kCPU, torch::kFloat).contiguous();
  kernels::Quant4Data d = kernels::quantize4_ref(host.data_ptr<float>(), q->n_, opt.blocksize,
                                                 opt.type, /*double_quant=*/false);
  if (opt.double_quant) {
    // bitsandbytes' offset: torch's fp32 mean of the absmax values, summed as torch sums.
    const float offset =
        torch::from_blob(d.absmax.data(), {static_cast<int64_t>(d.absmax.size())}, torch::kFloat)
            .mean()
            .item<float>();
    kernels::double_quantize_ref(d, offset, bnb_dynamic_map().data_ptr<float>());
  }
  auto bytes = [&](const std::vector<std::uint8_t>& v) {
    return torch::from_blob(const_cast<std::uint8_t*>(v.data()), {static_cast<int64_t>(v.size())},
                            torch::kByte).to(device);
  };
  auto floats = [&](const std::vector<float>& v) {
    return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())},
                            torch::kFloat).to(device);
  };
  q->packed = bytes(d.packed);
  if (opt.double_quant) {
    q->qabsmax = bytes(d.qabsmax);
    q->absmax2 = floats(d.absmax2);
    q->offset = d.offset;
    q->dynamic = floats(d.dynamic);
  } else {
    q->absmax = floats(d.absmax);
  }
  // from_blob(...).to(device) copies only for another device: own the CPU bytes.
  if (!device.is_cuda()) {
    q->packed = q->packed.clone();
    if (q->qabsmax.defined()) q->qabsmax = q->qabsmax.clone(), q->absmax2 = q->absmax2.clone();
    if (q->dynamic.defined()) q->dynamic = q->dynamic.clone();
    if (q->absmax.defined()) q->absmax = q->absmax.clone();
  }
  return q;
}

c10::intrusive_ptr<Quant4Weight> Quant4Weight::from_parts(
    const std::vector<std::int64_t>& shape, const Quant4Options& opt, const torch::Tensor& packed,
    const torch::Tensor& absmax, const torch::Tensor& qabsmax, const torch::Tensor& absmax2,
    const torch::Tensor& dynamic, double offset, torch::Device device) {
  torch::NoGradGuard no_grad;
  if (opt.blocksize <= 0 || opt.blocksize % 2 != 0)
    throw std::invalid_argument("blocksize " + std::to_string(opt.blocksize) +
                                " is not a positive even number");
  auto q = c10::make_intrusive<Quant4Weight>();
  q->shape_ = shape;
  q->n_ = 1;
  for (const auto d : shape) q->n_ *= d;
  q->opt_ = opt;
  const std::int64_t blocks = kernels::quant4_blocks(q->n_, opt.blocksize);
  // The device's own copy (a checkpoint's tensors are read-only views of the mapped file).
  auto take = [&](const torch::Tensor& t, torch::ScalarType dtype, std::int64_t numel,
                  const char* what) {
    if (!t.defined()) throw std::invalid_argument(std::string(what) + " is missing");
    if (t.scalar_type() != dtype)
      throw std::invalid_argument(std::string(what) + " is " + c10::toString(t.scalar_type()) +
                                  ", expected " + c10::toString(dtype));
    if (t.numel() != numel)
      throw std::invalid_argument(std::string(what) + " holds " + std::to_string(t.numel()) +
                                  " values, expected " + std::to_string(numel) + " for a " +
                                  c10::str(c10::IntArrayRef(shape)) + " weight in blocks of " +
                                  std::to_string(opt.blocksize));
    return t.reshape({-1}).to(device, /*non_blocking=*/false, /*copy=*/true);
  };
  q->packed = take(packed, torch::kByte, (q->n_ + 1) / 2, "the packed weight");
  if (opt.double_quant) {
    q->qabsmax = take(qabsmax, torch::kByte, blocks, "the quantized absmax");
    q->absmax2 = take(absmax2, torch::kFloat, (blocks + 255) / 256, "the nested absmax");
    q->dynamic = take(dynamic, torch::kFloat, 256, "the nested quant map");
    q->offset = offset;
  } else {
    q->absmax = take(absmax, torch::kFloat, blocks, "the absmax");
  }
  return q;
}

torch::Tensor Quant4Weight::dequantize(torch::ScalarType dtype) const {
  torch::NoGradGuard no_grad;
  const auto out_dtype = dtype == torch::kBFloat16 ? torch::kBFloat16 : torch::kFloat;
#if STUDIO_TRAINER_FUSED_KERNELS
  if (packed.is_cuda()) {
    kernels::Quant4Tensors t{packed, absmax, qabsmax, absmax2, dynamic, offset, n_,
                             opt_.blocksize, static_cast<int>(opt_.type)};
    return kernels::dequantize4(t, out_dtype).view(shape_).to(dtype);
  }
#endif
  // The reference's arithmetic in ATen ops: code[index] * absmax, in fp32, rounded once.
  const auto& c = kernels::quant4_code(opt_.type);
  const auto code = torch::tensor(std::vector<float>(c.begin(), c.end()), packed.options().dtype(torch::kFloat));
  const auto idx = torch::stack({packed.bitwise_right_shift(4), packed.bitwise_and(15)}, 1)
                       .reshape({-1})
                       .narrow(0, 0, n_)
                       .to(torch::kLong);
  const int64_t blocks = kernels::quant4_blocks(n_, opt_.blocksize);
  torch::Tensor scale = absmax;
  if (qabsmax.defined())
    scale = dynamic.index_select(0, qabsmax.to(torch::kLong)) *
                absmax2.repeat_interleave(256).narrow(0, 0, blocks) +
            static_cast<float>(offset);
  const auto values =
      code.index_select(0, idx) * scale.repeat_interleave(opt_.blocksize).narrow(0, 0, n_);
  return values.view(shape_).to(dtype);
}

std::int64_t Quant4Weight::bytes() const {
  std::int64_t b = 0;
  for (const auto* t : {&packed, &absmax, &qabsmax, &absmax2, &dynamic})
    if (t->defined()) b += t->numel() * static_cast<std::int64_t>(t->element_size());
  return b;
}

namespace {

struct Quant4LinearFunction : torch::autograd::Function<Quant4LinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const c10::intrusive_ptr<Quant4Weight>& q) {
    ctx->saved_data["q"] = c10::IValue::make_capsule(q);
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    return torch::linear(x, q->dequantize(x.scalar_type()));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto q = c10::static_intrusive_pointer_cast<Quant4Weight>(ctx->saved_data["q"].toCapsule());
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {torch::matmul(grads[0], q->dequantize(dtype)), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor quant4_linear(const torch::Tensor& x, const c10::intrusive_ptr<Quant4Weight>& q) {
  if (torch::GradMode::is_enabled() && x.requires_grad()) return Quant4LinearFunction::apply(x, q);
  return torch::linear(x, q->dequantize(x.scalar_type()));
}

}  // namespace studio::trainer
