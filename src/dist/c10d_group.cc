// The Group of several processes on c10d: a TCPStore at rank 0's host for the rendezvous and the markers, Gloo's
// process group between CPU processes, NCCL's between GPUs (the CUDA build).
#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#ifdef ALPS_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <functional>
#include <numeric>

#include "alps/core/error.h"
#include "alps/dist/group.h"

namespace alps::dist {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

bool is_loopback(const std::string& addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0; }

// The c10d process group, whatever its version's class hierarchy (ProcessGroup in libtorch 1.13, Backend in 2.x).
#if TORCH_VERSION_MAJOR >= 2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// What the groups of one run share: the store, where the ranks meet and leave their markers and failure reasons,
// the backend and its transport.
struct Connection {
  c10::intrusive_ptr<c10d::Store> store;
  // Another connection to that store: a store client serves one thread at a time (libtorch 1.13's deadlocks when two
  // threads share it), and a group of some ranks opens, and NCCL later makes its communicator, on whichever thread
  // uses it while the state writer waits on `store` for the ranks' shards.
  std::function<c10::intrusive_ptr<c10d::Store>()> connect;
  std::string backend;
  std::chrono::seconds timeout;
  c10::Device comm_device{c10::kCPU};
  std::string master;  // HOST:PORT, for messages
  int world_rank = 0, world_size = 1;
  std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices;
};

class C10dGroup final : public Group {
 public:
  // The ranks `members` (world ranks, sorted) of the run, as ranks 0 .. n - 1, their process group opened under
  // `prefix` in the store.
  C10dGroup(std::shared_ptr<const Connection> c, c10::intrusive_ptr<c10d::Store> store, std::vector<int> members,
            const std::string& prefix)
      : c_(std::move(c)), store_(std::move(store)), members_(std::move(members)) {
    rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), c_->world_rank) - members_.begin());
    size_ = static_cast<int>(members_.size());
    ALPS_CHECK(rank_ < size_, "rank ", c_->world_rank, " is not a member of the group ", prefix);
    const auto prefixed = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
    try {
      if (c_->backend == "gloo") {
        auto opts = c10d::ProcessGroupGloo::Options::create(c_->timeout);
        opts->devices = c_->gloo_devices;
        group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank_, size_, opts);
      } else {
#ifdef ALPS_HAVE_NCCL
        auto opts = c10d::ProcessGroupNCCL::Options::create();
        opts->timeout = c_->timeout;
        group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, rank_, size_, opts);
#else
        ALPS_FAIL("this alps was built without NCCL");
#endif
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      ALPS_FAIL("rank ", c_->world_rank, " of ", c_->world_size, ": opening the ", c_->backend,
                " process group through ", c_->master, " failed: ", first_line(e.what()));
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return c_->backend; }
  std::vector<std::string> places() const override { return places_; }
  void set_places(std::vector<std::string> places) { places_ = std::move(places); }

  std::unique_ptr<Group> subgroup(const std::vector<int>& members, const std::string& name) override {
    std::vector<int> world;
    for (int m : members) world.push_back(members_.at(static_cast<size_t>(m)));
    std::string prefix = "sub/" + name;
    for (int m : world) prefix += "/" + std::to_string(m);
    return std::make_unique<C10dGroup>(c_, c_->connect(), std::move(world), prefix);
  }

  void reduce_sum(at::Tensor& t, int owner, const std::string& what) override {
    at::Tensor c = t.to(c_->comm_device).contiguous();
    std::vector<at::Tensor> v{c};
    c10d::ReduceOptions o;
    o.rootRank = owner;
    o.reduceOp = c10d::ReduceOp::SUM;
    run([&] { return group_->reduce(v, o); }, what);
    if (rank_ == owner && !c.is_same(t)) t.copy_(c);
    bytes_reduced_ += static_cast<int64_t>(c.nbytes());
  }

  void broadcast(at::Tensor& t, int root, const std::string& what) override {
    at::Tensor c = t.to(c_->comm_device).contiguous();
    // As bytes: the same bits whatever the dtype (bf16 included), for every backend.
    std::vector<at::Tensor> v{at::from_blob(c.data_ptr(), {static_cast<int64_t>(c.nbytes())},
                                            at::TensorOptions().dtype(at::kByte).device(c.device()))};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    run([&] { return group_->broadcast(v, o); }, what);
    if (rank_ != root && !c.is_same(t)) t.copy_(c);
    bytes_broadcast_ += static_cast<int64_t>(c.nbytes());
  }

  void publish(const std::string& key) override {
    try {
      store_->set(key, std::vector<uint8_t>{1});
    } catch (const std::exception& e) {
      fail("marking " + key + " in the store", e);
    }
  }

  void wait_for(const std::vector<std::string>& keys, const std::string& what) override {
    try {
      store_->wait(keys, c_->timeout);
    } catch (const std::exception& e) {
      fail(what, e);
    }
  }

  void announce_failure(const std::string& why) override {
    try {
      if (store_->check({"failed"})) return;  // the first rank's reason is the one to give
      const std::string text = "rank " + std::to_string(c_->world_rank) + ": " + why;
      store_->set("failed", std::vector<uint8_t>(text.begin(), text.end()));
    } catch (const std::exception&) {
      // The store's host (rank 0) may be gone already: the others see the broken connection instead.
    }
  }

 private:
  template <typename Start>
  void run(Start&& start, const std::string& what) {
    try {
      start()->wait(std::chrono::duration_cast<std::chrono::milliseconds>(c_->timeout));
    } catch (const std::exception& e) {
      fail(what, e);
    }
  }

  // Says what stopped this rank: another rank's announced failure if the store holds one, else what the backend saw.
  [[noreturn]] void fail(const std::string& what, const std::exception& e) {
    std::string why;
    try {
      if (store_->check({"failed"})) {
        const auto v = store_->get("failed");
        why = std::string(v.begin(), v.end());
      }
    } catch (const std::exception&) {
      why = "rank 0 (the store's host, " + c_->master + ") cannot be reached: it has stopped";
    }
    ALPS_FAIL("rank ", c_->world_rank, " of ", c_->world_size, " stopped while ", what, ": ",
              why.empty() ? first_line(e.what()) + " (another rank stopped, or took longer than --dist-timeout " +
                                std::to_string(c_->timeout.count()) + " s)"
                          : why);
  }

  std::shared_ptr<const Connection> c_;
  c10::intrusive_ptr<c10d::Store> store_;  // this group's own connection (markers, failure reasons)
  std::vector<int> members_;  // world ranks, in this group's rank order
  int rank_ = 0, size_ = 1;
  c10::intrusive_ptr<CollectiveGroup> group_;
  std::vector<std::string> places_;
};

}  // namespace

std::string resolve_backend(const std::string& backend, const c10::Device& device) {
  ALPS_USAGE_CHECK(backend == "auto" || backend == "gloo" || backend == "nccl", "--dist-backend: unknown backend '",
                   backend, "' (expected auto, gloo or nccl)");
  if (backend == "auto") return device.is_cuda() ? "nccl" : "gloo";
#ifndef ALPS_HAVE_NCCL
  ALPS_USAGE_CHECK(backend != "nccl", "--dist-backend nccl: this alps was built without CUDA (scripts/setup.sh "
                   "--cuda builds one with NCCL); use gloo");
#endif
  ALPS_USAGE_CHECK(backend != "nccl" || device.is_cuda(), "--dist-backend nccl moves tensors between GPUs, but the "
                   "device is ", device.str(), ": use --device auto or cuda, or --dist-backend gloo");
  return backend;
}

// The rendezvous: every rank marks itself in the store and waits for the others' marks.
std::shared_ptr<const Connection> meet(const Launch& l, const c10::Device& device, std::string backend,
                                       std::chrono::seconds timeout) {
  auto c = std::make_shared<Connection>();
  c->backend = std::move(backend);
  c->timeout = timeout;
  c->comm_device = c->backend == "nccl" ? device : c10::Device(c10::kCPU);
  c->master = l.master_addr + ":" + std::to_string(l.master_port);
  c->world_rank = l.rank;
  c->world_size = l.world_size;
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(l.master_port);
  o.isServer = l.rank == 0 && !l.agent_store;
  o.numWorkers = static_cast<size_t>(l.world_size);
  o.waitWorkers = true;
  o.timeout = timeout;
  try {
    // Under a prefix of this start's own: a store torchrun's agent serves outlives restarts of the workers.
    const std::string root = "alps/" + std::to_string(l.restart);
    c->store = c10::make_intrusive<c10d::PrefixStore>(root, c10::make_intrusive<c10d::TCPStore>(l.master_addr, o));
    c->connect = [addr = l.master_addr, port = o.port, timeout, root]() -> c10::intrusive_ptr<c10d::Store> {
      c10d::TCPStoreOptions client;
      client.port = port;
      client.isServer = false;
      client.waitWorkers = false;
      client.timeout = timeout;
      return c10::make_intrusive<c10d::PrefixStore>(root, c10::make_intrusive<c10d::TCPStore>(addr, client));
    };
    c->store->set("rank/" + std::to_string(l.rank), std::vector<uint8_t>{1});
    std::vector<std::string> ranks;
    for (int r = 0; r < l.world_size; ++r) ranks.push_back("rank/" + std::to_string(r));
    c->store->wait(ranks, timeout);
  } catch (const std::exception& e) {
    ALPS_FAIL("rank ", l.rank, " of ", l.world_size, ": the ranks did not all meet at ", c->master, " (MASTER_ADDR:",
              "MASTER_PORT) within ", timeout.count(), " s (--dist-timeout): ", first_line(e.what()),
              l.rank == 0 ? "; is the port free, and were all ranks started?" : "; is rank 0 running there?");
  }
  if (c->backend == "gloo") {
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname != nullptr && *ifname != '\0')
      c->gloo_devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (is_loopback(l.master_addr))  // every rank on this host: the loopback interface
      c->gloo_devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      c->gloo_devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c;
}

std::unique_ptr<Group> join(const Launch& launch, const c10::Device& device, const GroupOptions& options) {
  const std::string backend = resolve_backend(options.backend, device);
#if TORCH_VERSION_MAJOR < 2
  // Measured: a libtorch 1.13 client waits forever on the store of torch 2.x's torchrun agent (its protocol changed).
  ALPS_USAGE_CHECK(!launch.agent_store, "torchrun's agent serves the ranks' store (TORCHELASTIC_USE_AGENT_STORE=True), "
                   "and torch 2.x's store does not speak with the libtorch 1.13 of this alps (the CPU build): start "
                   "the processes with `alps prune --nproc N` on one host, with srun, or with a launcher that sets "
                   "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT only; the CUDA build (libtorch 2.11) runs under "
                   "torchrun");
#endif
  std::vector<int> everyone(static_cast<size_t>(launch.world_size));
  std::iota(everyone.begin(), everyone.end(), 0);
  const auto connection = meet(launch, device, backend, options.timeout);
  auto group = std::make_unique<C10dGroup>(connection, connection->store, everyone, "group");
  // NCCL cannot serve two ranks on one GPU: say so before any work rather than hang in the first collective.
  group->set_places(group->all_gather(host_name() + " " + device.str(), "comparing the ranks' devices"));
  const auto all = group->places();
  if (backend == "nccl")
    for (int a = 0; a < group->size(); ++a)
      for (int b = a + 1; b < group->size(); ++b)
        ALPS_USAGE_CHECK(all[static_cast<size_t>(a)] != all[static_cast<size_t>(b)], "ranks ", a, " and ", b,
                         " both use ", all[static_cast<size_t>(a)], ": NCCL needs one GPU per rank (LOCAL_RANK ",
                         "picks cuda:LOCAL_RANK; check CUDA_VISIBLE_DEVICES and --nproc-per-node)");
  return group;
}

}  // namespace alps::dist
