# STAR's images, multi-stage. Targets, and the names scripts/images.sh builds them under
# (the registry is set there alone; the chart and the example jobs use these names):
#   operator  ghcr.io/star-dev/star-operator:0.1.0: star-operator (runs as a non-root
#             user), with the learned selector's model (/usr/share/star/selector.json)
#             when models/selector.json is committed
#   agent     ghcr.io/star-dev/star-agent:0.1.0: star-agent (the node agent DaemonSet)
#   trainer   ghcr.io/star-dev/fmnist:0.1: star-fmnist and the training shim (the example
#             jobs' pods), with Fashion-MNIST; and star.torch with PyTorch and
#             examples/pytorch/train_fmnist.py (WORKDIR /opt/star), the plain PyTorch
#             script of examples/pytorch/fmnist-job.yaml
#   trainer-cuda  ghcr.io/star-dev/fmnist-cuda:0.1: star.torch with NCCL, PyTorch with CUDA
#             and torchrun, for GPU nodes (examples/gpu/fmnist-gpu-job.yaml; at the end)
#
#   bash scripts/images.sh build        every target under its name (podman, or docker)
#   --build-arg BUILD_IMAGE=... BASE_IMAGE=...   images to build on and to run on
#
# The builder compiles only the three binaries (no tests, no benchmarks, no CUDA).
# Base images are pinned by digest (the multi-platform index of Debian's dated tag, as
# docker-library/repo-info lists it), so a moved tag never changes what is built; the tag
# only says which one it is. An override should be pinned the same way (name@sha256:...).
ARG BUILD_IMAGE=debian:bookworm-20260918@sha256:f37a335e82bca302e955fa39f9dfe28f1be618f016f8a2b56318e5a5111afc26
ARG BASE_IMAGE=debian:bookworm-20260918-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

FROM ${BUILD_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev libglpk-dev \
      libgloo-dev libcpprest-dev libssl-dev libboost-dev prometheus-cpp-dev zlib1g-dev \
      libtorch-dev libcgroup-dev libnl-3-dev libnl-route-3-dev libyaml-cpp-dev libyaml-dev \
      python3-dev pybind11-dev libxgboost-dev ccache \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# A compiler cache is used when the build mounts one at /ccache (the image tests do:
# `podman build -v DIR:/ccache`); it changes nothing in what is built.
RUN launcher=$(if [ -d /ccache ]; then echo "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"; fi) \
    && export CCACHE_DIR=/ccache CCACHE_BASEDIR=/src \
    && cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTAR_BUILD_TESTS=OFF $launcher \
      -DSTAR_BUILD_BENCH=OFF -DSTAR_WITH_CUDA=OFF -DSTAR_WITH_TORCH=ON -DCMAKE_INSTALL_PREFIX=/usr \
    && cmake --build /build --target star-operator star-agent star-fmnist star_shim_python \
    && mkdir -p /out/python \
    && cp /build/operator/star-operator /build/node-agent/star-agent \
          /build/training-shim/examples/fmnist/star-fmnist /out/ \
    && strip /out/star-* \
    && cp -r /build/python/star /out/python/ && strip /out/python/star/_star*.so \
    && mkdir -p /out/share/star \
    && if [ -f models/selector.json ]; then cp models/selector.json /out/share/star/; fi

# What every runtime image has: CA certificates (the API server's CA may be a public one)
# and the libraries all three binaries link.
FROM ${BASE_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      ca-certificates libcpprest2.10 libssl3 libyaml-cpp0.7 libyaml-0-2 libprometheus-cpp-core1.0 \
    && rm -rf /var/lib/apt/lists/*
LABEL org.opencontainers.image.source="https://github.com/star-dev/star" \
      org.opencontainers.image.licenses="Apache-2.0"

FROM runtime AS operator
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends libxgboost0 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/star-operator /usr/bin/star-operator
# The learned selector's model, star-operator's default --selector-model (an empty
# directory when no model is committed: jobs with selector ML then use the heuristic).
COPY --from=build /out/share/star/ /usr/share/star/
# 65532: the conventional non-root user of distroless images; the chart's
# securityContext asks for runAsNonRoot.
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/bin/star-operator"]
CMD ["--in-cluster"]

FROM runtime AS agent
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      libcgroup2 libnl-3-200 libnl-route-3-200 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/star-agent /usr/bin/star-agent
# Root: it writes cgroup files and tc qdiscs on the host (the chart grants NET_ADMIN).
ENTRYPOINT ["/usr/bin/star-agent"]

FROM runtime AS trainer
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      libtorch1.13 libgloo0 libprometheus-cpp-pull1.0 dataset-fashion-mnist \
      python3-torch python3-numpy \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/star-fmnist /usr/bin/star-fmnist
COPY --from=build /out/python/star /usr/lib/python3/dist-packages/star
COPY examples/pytorch/train_fmnist.py /opt/star/examples/pytorch/train_fmnist.py
WORKDIR /opt/star
USER 65532:65532
ENTRYPOINT ["/usr/bin/star-fmnist"]

# The CUDA trainer (ghcr.io/star-dev/fmnist-cuda:0.1), for GPU nodes
# (examples/gpu/fmnist-gpu-job.yaml): star.torch built with the NCCL backend, against the
# CUDA runtime and NCCL of NVIDIA's PyPI wheels (scripts/install-cuda.sh), and PyTorch 2.8
# with CUDA 12.8 from PyPI in /opt/venv, whose torchrun starts one process per GPU; and
# examples/pytorch/train_fmnist.py. star.torch is built as `pip install` builds it
# (training-shim/python/pyproject.toml), as a wheel installed into /opt/venv. Building it
# needs PyPI (the image tests, which reach no index, build the other three).
FROM build AS build-cuda
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3-pip \
    && rm -rf /var/lib/apt/lists/*
RUN STAR_TOOLS_CACHE=/opt/star-tools STAR_PYTHON=/usr/bin/python3 bash scripts/install-cuda.sh >/cuda-root \
    && python3 -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels \
      --config-settings=cmake.define.STAR_WITH_CUDA=ON \
      --config-settings=cmake.define.STAR_CUDA_ROOT="$(cat /cuda-root)" ./training-shim/python

FROM runtime AS trainer-cuda
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      python3 python3-venv libgloo0 libprometheus-cpp-pull1.0 dataset-fashion-mnist \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir torch==2.8.0 numpy
# torch's wheels bring the CUDA runtime and NCCL that star.torch's module links.
ENV LD_LIBRARY_PATH=/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib:/opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY --from=build-cuda /wheels /tmp/wheels
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps /tmp/wheels/star-*.whl && rm -rf /tmp/wheels
COPY examples/pytorch/train_fmnist.py /opt/star/examples/pytorch/train_fmnist.py
WORKDIR /opt/star
USER 65532:65532
ENTRYPOINT ["/opt/venv/bin/torchrun"]
