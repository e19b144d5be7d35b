// star-fmnist as one stage of a pipeline-parallel job (--stages S > 1, the operator's and
// star local's STAR_PIPELINE_STAGES): an MLP on Fashion-MNIST (flatten, S - 1 hidden
// layers of --hidden units with ReLU, the classifier) split into S stages, one layer
// each, run by the shim's PipelineEngine with M micro-batches per iteration and the
// warm-up depths of --warmup (default: plain 1F1B). Rank = replica * S + stage; the
// replicas (world / S) each take their share of the global batch and average each
// stage's gradients over the replicas (an all-reduce among that stage's ranks). Stage 0
// and the last stage draw the same batches (the same shard and seed): the first feeds
// the images, the last the labels.
//
// stdout: one final JSON line {"stage":S,"iterations":I,"seconds":T,
// "median_iteration_ms":..,"links":[{"peer":..,"send_ms":..,"wait_ms":..,...}],...}.
#pragma once

#include "flags.h"

namespace star::fmnist {

// The process's exit status (errors on stderr).
int RunPipeline(const Flags& flags);

}  // namespace star::fmnist
