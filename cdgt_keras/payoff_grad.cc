// CdgtPayoffGrad: the gradient of the shipped preset's payoff and rarity parts with respect to the fused probabilities,
// in one pass (compiled on first use by cdgt_keras/kernels.py; cdgt_keras/payoff_grad.py wraps it, and TensorFlow's
// own gradient of the same formulas is the fallback and the reference).
//
// The payoff R = -mean(BCE(y, clip(f))) and the rarity parts r_i = mean_b(sum_l m_il * w_l * y * log(clip(f))) / L
// take about twenty element-wise kernels backward, each a pass over the [B, L] batch (clip's gradient alone is two
// comparisons, two zero fills and two selections). For each element, in the order and float32 arithmetic of
// TensorFlow's gradient ops:
//   keep = lo <= f <= hi                                      (clip's gradient: Minimum's, then Maximum's)
//   s1   = keep ? (g_a * y) * (1 / f) + -((g_a * (1 - y)) * (1 / (1 - f))) : 0   (the payoff's BCE through both logs)
//   s2   = keep ? ((c_l * y) * (1 / f)) : 0                  (the rarity parts, c_l = (sum_i g_i m_il) * w_l)
//   out  = s1 + s2
// where g_a is the gradient reaching each element of the BCE's sum and g_i each row of player i's rarity part
// (both the same on every element: scalars), and the sum over players runs in player order. The reciprocals are
// IEEE divisions, the same on every element and machine; TensorFlow's Reciprocal approximates them on all but the
// last elements of a vectorised pass (within one float32 ulp), so its bits depend on where an element falls in
// the tensor, and a block of the labels (cdgt_keras/turns.py) would not get the whole's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace cdgt {
using namespace tensorflow;  // NOLINT

REGISTER_OP("CdgtPayoffGrad")
    .Input("fused: float")
    .Input("labels: float")
    .Input("rarity: float")
    .Input("masks: float")
    .Input("scale: float")
    .Input("player_scale: float")
    .Input("players: bool")
    .Attr("lo: float")
    .Attr("hi: float")
    .Output("grad: float")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle fused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &fused));
      c->set_output(0, fused);
      return absl::OkStatus();
    })
    .Doc("The gradient of the BCE payoff and the log-scoring rarity parts with respect to the fused probabilities.");

// The inputs both ops read: fused [B, W], labels of its shape, rarity [W] and the players' masks [N, W].
absl::Status CheckGameInputs(OpKernelContext* ctx) {
  const Tensor& fused = ctx->input(0);
  const Tensor& masks = ctx->input(3);
  if (fused.dims() != 2) return errors::InvalidArgument("fused must be a matrix, got ", fused.shape().DebugString());
  if (ctx->input(1).shape() != fused.shape()) {
    return errors::InvalidArgument("labels must have the fused probabilities' shape ", fused.shape().DebugString(),
                                   ", got ", ctx->input(1).shape().DebugString());
  }
  const int64_t width = fused.dim_size(1);
  if (ctx->input(2).dims() != 1 || ctx->input(2).dim_size(0) != width) {
    return errors::InvalidArgument("rarity must be a vector of ", width, " weights");
  }
  if (masks.dims() != 2 || masks.dim_size(1) != width) {
    return errors::InvalidArgument("masks must be [players, ", width, "]");
  }
  return absl::OkStatus();
}

// A kernel of the clipped probabilities: the clip's bounds lo and hi are its attributes.
class ClippedKernel : public OpKernel {
 public:
  explicit ClippedKernel(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("lo", &lo_));
    OP_REQUIRES_OK(c, c->GetAttr("hi", &hi_));
  }

 protected:
  float lo_ = 0.0f, hi_ = 1.0f;
};

class PayoffGradOp : public ClippedKernel {
 public:
  explicit PayoffGradOp(OpKernelConstruction* c) : ClippedKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& fused = ctx->input(0);
    const Tensor& masks = ctx->input(3);
    const Tensor& player_scale = ctx->input(5);
    const Tensor& players = ctx->input(6);
    OP_REQUIRES_OK(ctx, CheckGameInputs(ctx));
    const int64_t rows = fused.dim_size(0), width = fused.dim_size(1);
    const int64_t n = masks.dim_size(0);
    OP_REQUIRES(ctx, player_scale.NumElements() == n && players.NumElements() == n,
                errors::InvalidArgument("player_scale and players must hold one value per player (", n, ")"));
    OP_REQUIRES(ctx, ctx->input(4).NumElements() == 1, errors::InvalidArgument("scale must be a scalar"));

    // c_l = (sum over the live players of g_i * m_il) * w_l: the same on every row, so computed once.
    const float* m = masks.flat<float>().data();
    const float* w = ctx->input(2).flat<float>().data();
    const float* g = player_scale.flat<float>().data();
    const bool* live = players.flat<bool>().data();
    std::vector<float> c(width, 0.0f);
    bool any = false;
    for (int64_t l = 0; l < width; ++l) {
      bool first = true;
      float sum = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        if (!live[i]) continue;
        const float term = g[i] * m[i * width + l];
        sum = first ? term : sum + term;
        first = false;
      }
      if (!first) c[l] = sum * w[l];
      any = any || !first;
    }

    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, fused.shape(), &out));
    const float* f = fused.flat<float>().data();
    const float* y = ctx->input(1).flat<float>().data();
    const float ga = ctx->input(4).flat<float>()(0);
    const float lo = lo_, hi = hi_;
    const float* cl = c.data();
    float* o = out->flat<float>().data();
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t base = b * width;
        for (int64_t l = 0; l < width; ++l) {
          const int64_t j = base + l;
          const float fv = f[j], yv = y[j];
          const bool keep = fv >= lo && fv <= hi;  // false for NaN, as TensorFlow's comparisons
          const float ip = 1.0f / fv, iq = 1.0f / (1.0f - fv);
          const float s1 = (ga * yv) * ip + -((ga * (1.0f - yv)) * iq);
          const float kept1 = keep ? s1 : 0.0f;
          if (any) {
            const float kept2 = keep ? (cl[l] * yv) * ip : 0.0f;
            o[j] = kept1 + kept2;
          } else {
            o[j] = kept1;
          }
        }
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    Shard(workers->NumThreads(), workers, rows, 12 * width, run);
  }
};

REGISTER_KERNEL_BUILDER(Name("CdgtPayoffGrad").Device(DEVICE_CPU), PayoffGradOp);
// CdgtPayoffValues: the values whose gradient CdgtPayoffGrad takes, in one pass: the BCE's sum over the batch,
//   bce = sum_bl -(y log(clip(f)) + (1 - y) log(1 - clip(f)))
// and each player's rarity sum, parts_i = sum_bl m_il * w_l * y * log(clip(f)). TensorFlow's ops take some seventeen
// passes over [B, L] for them (two clips, three logs, the products, the sums), and training reads them only as logs
// (loss, payoff, potential). The unlabelled entries' log(1 - f) are summed as the log of their product (float64,
// renormalised as it goes: one log a row); the labelled entries (y != 0) are taken term by term. The sums are in
// float64, row by row and then over the rows in order, so they do not depend on how the rows are shared between
// threads; they differ from TensorFlow's float32 sums (another order, float32 logs) in the last float32 bits.
REGISTER_OP("CdgtPayoffValues")
    .Input("fused: float")
    .Input("labels: float")
    .Input("rarity: float")
    .Input("masks: float")
    .Attr("lo: float")
    .Attr("hi: float")
    .Output("bce: double")
    .Output("parts: double")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle fused, masks;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &fused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 2, &masks));
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Vector(c->Dim(masks, 0)));
      return absl::OkStatus();
    })
    .Doc("The BCE's sum and each player's rarity sum of the fused probabilities, in one pass.");

class PayoffValuesOp : public ClippedKernel {
 public:
  explicit PayoffValuesOp(OpKernelConstruction* c) : ClippedKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& fused = ctx->input(0);
    const Tensor& masks = ctx->input(3);
    OP_REQUIRES_OK(ctx, CheckGameInputs(ctx));
    const int64_t rows = fused.dim_size(0), width = fused.dim_size(1);
    const int64_t n = masks.dim_size(0);
    const float* f = fused.flat<float>().data();
    const float* y = ctx->input(1).flat<float>().data();
    const float* w = ctx->input(2).flat<float>().data();
    const float* m = masks.flat<float>().data();
    const float lo = lo_, hi = hi_;
    std::vector<double> row_bce(rows, 0.0), row_parts(rows * n, 0.0);
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        double* parts = row_parts.data() + b * n;
        const float* fb = f + b * width;
        const float* yb = y + b * width;
        // The negatives' sum of log(1 - p) as the log of a product: kLanes running products (independent, so the
        // loop vectorises), each brought back to [1/2, 1) by frexp every kSpan factors (a factor is at least
        // 1 - hi, about 2^-23, so kSpan of them stay far above float64's smallest normal), one log at the end.
        constexpr int kLanes = 8, kSpan = 32;
        double prod[kLanes];
        int64_t exponent = 0;
        for (int k = 0; k < kLanes; ++k) prod[k] = 1.0;
        int64_t l = 0;
        while (l + kLanes <= width) {
          const int64_t stop = std::min<int64_t>(width - (width - l) % kLanes, l + kLanes * kSpan);
          for (; l < stop; l += kLanes) {
            for (int k = 0; k < kLanes; ++k) {
              const float fv = fb[l + k];
              const float p = fv < lo ? lo : (fv > hi ? hi : fv);  // tf.clip_by_value; NaN stays NaN
              prod[k] *= yb[l + k] == 0.0f ? static_cast<double>(1.0f - p) : 1.0;
            }
          }
          for (int k = 0; k < kLanes; ++k) {
            int e = 0;
            prod[k] = std::frexp(prod[k], &e);
            exponent += e;
          }
        }
        double log_q = static_cast<double>(exponent) * 0.69314718055994530942;
        for (int k = 0; k < kLanes; ++k) log_q += std::log(prod[k]);
        for (; l < width; ++l) {
          const float fv = fb[l];
          const float p = fv < lo ? lo : (fv > hi ? hi : fv);
          if (yb[l] == 0.0f) log_q += static_cast<double>(std::log(1.0f - p));
        }
        // The labelled entries (y != 0, a few per row), term by term: y log p + (1 - y) log(1 - p).
        double labelled = 0.0;
        for (int64_t j = 0; j < width; ++j) {
          const float yv = yb[j];
          if (yv == 0.0f) continue;
          const float fv = fb[j];
          const float p = fv < lo ? lo : (fv > hi ? hi : fv);
          const float log_p = std::log(p);
          float term = yv * log_p;
          if (yv != 1.0f) term = term + (1.0f - yv) * std::log(1.0f - p);
          labelled += static_cast<double>(term);
          const float weighted = (yv * log_p) * w[j];
          for (int64_t i = 0; i < n; ++i) parts[i] += static_cast<double>(weighted * m[i * width + j]);
        }
        row_bce[b] = -(log_q + labelled);
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    Shard(workers->NumThreads(), workers, rows, 8 * width, run);
    Tensor* bce_out = nullptr;
    Tensor* parts_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &bce_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n}), &parts_out));
    double total = 0.0;
    for (int64_t b = 0; b < rows; ++b) total += row_bce[b];
    bce_out->scalar<double>()() = total;
    auto parts = parts_out->flat<double>();
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0.0;
      for (int64_t b = 0; b < rows; ++b) sum += row_parts[b * n + i];
      parts(i) = sum;
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("CdgtPayoffValues").Device(DEVICE_CPU), PayoffValuesOp);
}  // namespace cdgt
