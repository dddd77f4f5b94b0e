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
//
// With the attribute gamma > 0 the payoff is the focal loss, R = -mean(y (1 - p)^g (-log p) + (1 - y) p^g
// (-log(1 - p))), p = clip(f): its slope per element is FocalRow's below, scaled by g_a, and the rarity parts' as
// above. Its powers are exp(g log p) in Eigen's packets, where TensorFlow's ops take Pow: the two gradients agree
// within float32 rounding (tested), and each element's bits do not depend on its place, so a block gets the whole's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "Eigen/Core"

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
    .Attr("gamma: float = 0.0")
    .Output("grad: float")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle fused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &fused));
      c->set_output(0, fused);
      return absl::OkStatus();
    })
    .Doc("The gradient of the BCE (gamma 0) or focal payoff and the log-scoring rarity parts with respect to the "
         "fused probabilities.");

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
    OP_REQUIRES_OK(c, c->GetAttr("gamma", &gamma_));
    OP_REQUIRES(c, gamma_ >= 0.0f, errors::InvalidArgument("gamma must be at least 0, got ", gamma_));
  }

 protected:
  float lo_ = 0.0f, hi_ = 1.0f, gamma_ = 0.0f;
};

// The focal loss on one row, in Eigen's vectorised float32 log and exp (the packets TensorFlow's Log and Exp kernels
// use): p = clip(f), q = 1 - p, with p^(g-1) = exp((g-1) log p) (1 / sqrt(p) at g = 1/2) and (1-p)^(g-1)
// likewise, and
//   slope = -d/dp loss = y (q^g / p - g q^(g-1) log p) + (1 - y) (g p^(g-1) log q - p^g / q)
//   loss  = y q^g (-log p) + (1 - y) p^g (-log q)
// The row is copied into arrays padded to a multiple of 16 (aligned, as Eigen allocates them), so every element
// goes through the same packet instructions, wherever it sits: a block of the labels gets the whole's bits.
class FocalRow {
 public:
  using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
  FocalRow(int64_t width, float lo, float hi, float gamma)
      : width_(width), lo_(lo), hi_(hi), g_(gamma), p_((width + 15) / 16 * 16), y_(p_.size()) {}

  // Loads row b of f and y (f clipped to [lo, hi]; the padding at p = 1/2, y = 0) and takes the logs and powers.
  void Load(const float* f, const float* y) {
    for (int64_t l = 0; l < width_; ++l) {
      const float fv = f[l];
      p_[l] = fv < lo_ ? lo_ : (fv > hi_ ? hi_ : fv);
      y_[l] = y[l];
    }
    for (int64_t l = width_; l < p_.size(); ++l) p_[l] = 0.5f, y_[l] = 0.0f;
    q_ = 1.0f - p_;
    lp_ = p_.log();
    lq_ = q_.log();
    if (g_ == 0.5f) {  // p^(-1/2) by IEEE square roots, not exp and log
      pg1_ = 1.0f / p_.sqrt();
      qg1_ = 1.0f / q_.sqrt();
    } else {
      pg1_ = ((g_ - 1.0f) * lp_).exp();
      qg1_ = ((g_ - 1.0f) * lq_).exp();
    }
  }
  Arr Slope() const {
    return y_ * ((qg1_ * q_) / p_ - (g_ * qg1_) * lp_) + (1.0f - y_) * ((g_ * pg1_) * lq_ - (pg1_ * p_) / q_);
  }
  Arr Loss() const { return -(y_ * (qg1_ * q_) * lp_ + (1.0f - y_) * (pg1_ * p_) * lq_); }
  const Arr& LogP() const { return lp_; }

 private:
  int64_t width_;
  float lo_, hi_, g_;
  Arr p_, y_, q_, lp_, lq_, pg1_, qg1_;
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
    const float lo = lo_, hi = hi_, gamma = gamma_;
    const float* cl = c.data();
    float* o = out->flat<float>().data();
    auto focal = [&](int64_t begin, int64_t end) {  // the focal payoff's slope, then the rarity's as below
      FocalRow row(width, lo, hi, gamma);
      for (int64_t b = begin; b < end; ++b) {
        row.Load(f + b * width, y + b * width);
        const FocalRow::Arr slope = row.Slope();
        for (int64_t l = 0, j = b * width; l < width; ++l, ++j) {
          const float fv = f[j], yv = y[j];
          const bool keep = fv >= lo && fv <= hi;
          const float s1 = keep ? ga * slope[l] : 0.0f;
          o[j] = any ? s1 + (keep ? (cl[l] * yv) * (1.0f / fv) : 0.0f) : s1;
        }
      }
    };
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
    if (gamma > 0.0f) {
      Shard(workers->NumThreads(), workers, rows, 60 * width, focal);
    } else {
      Shard(workers->NumThreads(), workers, rows, 12 * width, run);
    }
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
    .Attr("gamma: float = 0.0")
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
    .Doc("The payoff's loss sum (BCE, or focal at gamma > 0) and each player's rarity sum of the fused "
         "probabilities, in one pass.");

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
    const float lo = lo_, hi = hi_, gamma = gamma_;
    std::vector<double> row_bce(rows, 0.0), row_parts(rows * n, 0.0);
    auto focal = [&](int64_t begin, int64_t end) {  // the focal payoff: every element's loss, summed in float64
      FocalRow row(width, lo, hi, gamma);
      for (int64_t b = begin; b < end; ++b) {
        double* parts = row_parts.data() + b * n;
        const float* yb = y + b * width;
        row.Load(f + b * width, yb);
        const FocalRow::Arr loss = row.Loss();
        double sum = 0.0;
        for (int64_t j = 0; j < width; ++j) sum += static_cast<double>(loss[j]);
        for (int64_t j = 0; j < width; ++j) {
          if (yb[j] == 0.0f) continue;
          const float weighted = (yb[j] * row.LogP()[j]) * w[j];
          for (int64_t i = 0; i < n; ++i) parts[i] += static_cast<double>(weighted * m[i * width + j]);
        }
        row_bce[b] = sum;
      }
    };
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
    if (gamma > 0.0f) {
      Shard(workers->NumThreads(), workers, rows, 60 * width, focal);
    } else {
      Shard(workers->NumThreads(), workers, rows, 8 * width, run);
    }
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
