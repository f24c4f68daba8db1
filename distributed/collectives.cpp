#include "einsumdb/distributed/collectives.hpp"

#include <unistd.h>
#include "einsumdb/distributed/error.hpp"

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

namespace einsumdb {
namespace {

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

int size_of(MPI_Comm comm) {
  int s = 1;
  MPI_Comm_size(comm, &s);
  return s;
}

int as_count(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw MpiError(std::string(what) + " of " + std::to_string(n) +
                   " bytes exceeds what one MPI message can carry");
  return static_cast<int>(n);
}

nlohmann::json to_json(const Refusal& r) {
  return {{"rank", r.rank}, {"host", r.host}, {"code", r.code}, {"message", r.message}};
}

Refusal refusal_from(const nlohmann::json& j) {
  Refusal r;
  r.rank = j.at("rank").get<int>();
  r.host = j.at("host").get<std::string>();
  r.code = j.at("code").get<int>();
  r.message = j.at("message").get<std::string>();
  return r;
}

std::string describe(const std::vector<Refusal>& refusals, int procs) {
  std::string s;
  for (const auto& r : refusals) {
    if (!s.empty()) s += "; ";
    s += "rank " + std::to_string(r.rank) + " of " + std::to_string(procs);
    if (!r.host.empty()) s += " on " + r.host;
    s += ": " + r.message;
  }
  return s;
}

}  // namespace

std::string host_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && MPI_Get_processor_name(name, &length) == MPI_SUCCESS && length > 0)
    return std::string(name, static_cast<std::size_t>(length));
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) return host;
  return "unknown host";
}

int first_reserved_tag(MPI_Comm comm) {
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  // MPI guarantees tags up to 32767 at least.
  const int tag_ub = flag ? *static_cast<int*>(ub) : 32767;
  return tag_ub - 1;
}

Waiter::Waiter(MPI_Comm comm, double timeout_s, bool share_cores)
    : comm_(comm), timeout_s_(timeout_s), share_cores_(share_cores) {}

void Waiter::pause(int spin) const {
  // A rank that shares its core with a computing rank sleeps between polls (about 0.1 ms here),
  // so that the core goes to the kernel it waits for; one with a core of its own polls on.
  if (share_cores_ && spin > 100)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  else if (spin > 1000)
    std::this_thread::yield();
}

void Waiter::timed_out(const std::string& what) const {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_s_);
  throw TimeoutError(std::string("no progress for ") + seconds + " s while " + what +
                     " (another rank failed, stopped or lost its link?)");
}

void Waiter::wait(std::vector<MPI_Request>& requests, const std::string& what) const {
  if (requests.empty()) return;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (int spin = 0;; ++spin) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) {
      requests.clear();
      return;
    }
    if (Clock::now() > deadline) timed_out(what);
    pause(spin);
  }
}

std::string Waiter::receive_text(int source, int tag, const std::string& what, int* from) const {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (int spin = 0;; ++spin) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(source, tag, comm_, &found, &message, &status);
    if (found) {
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      std::string text(static_cast<std::size_t>(count), '\0');
      MPI_Mrecv(text.data(), count, MPI_CHAR, &message, MPI_STATUS_IGNORE);
      if (from) *from = status.MPI_SOURCE;
      return text;
    }
    if (Clock::now() > deadline) timed_out(what);
    pause(spin);
  }
}

JobRefused::JobRefused(std::vector<Refusal> refusals, int procs, bool everyone_knows)
    : MpiError(describe(refusals, procs)),
      refusals_(std::move(refusals)),
      everyone_knows_(everyone_knows) {}

int JobRefused::code() const {
  for (const auto& r : refusals_)
    if (r.code == 2) return 2;
  return 1;
}

Refusal refusal_of(MPI_Comm comm, const std::exception& e) {
  Refusal r;
  r.rank = rank_of(comm);
  r.host = host_name();
  r.code = dynamic_cast<const SpecError*>(&e) ? 2 : 1;
  r.message = e.what();
  return r;
}

void agree(const Waiter& waiter, const std::optional<Refusal>& mine) {
  const MPI_Comm comm = waiter.comm();
  const int rank = rank_of(comm), procs = size_of(comm);
  if (procs == 1) {
    if (mine) throw JobRefused({*mine}, procs, true);
    return;
  }
  const int status_tag = first_reserved_tag(comm), verdict_tag = status_tag + 1;
  if (rank != 0) {
    const std::string text = mine ? to_json(*mine).dump() : std::string("null");
    std::vector<MPI_Request> send(1);
    MPI_Isend(text.data(), as_count(text.size(), "a rank's status"), MPI_CHAR, 0, status_tag, comm,
              send.data());
    const auto verdict = nlohmann::json::parse(waiter.receive_text(
        0, verdict_tag, "waiting for rank 0 to say whether every rank can go on"));
    waiter.wait(send, "telling rank 0 whether this rank can go on");
    std::vector<Refusal> refusals;
    for (const auto& r : verdict.at("refusals")) refusals.push_back(refusal_from(r));
    if (!refusals.empty())
      throw JobRefused(std::move(refusals), procs, verdict.at("everyone_knows").get<bool>());
    return;
  }

  // Rank 0 hears every rank, or notes which did not answer within the time-out.
  std::vector<std::optional<Refusal>> status(static_cast<std::size_t>(procs));
  std::vector<bool> answered(static_cast<std::size_t>(procs), false);
  status[0] = mine;
  answered[0] = true;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(waiter.timeout_s());
  int heard = 1;
  for (int spin = 0; heard < procs && std::chrono::steady_clock::now() < deadline; ++spin) {
    int found = 0;
    MPI_Message message;
    MPI_Status st;
    MPI_Improbe(MPI_ANY_SOURCE, status_tag, comm, &found, &message, &st);
    if (!found) {
      if (spin > 1000) std::this_thread::yield();
      continue;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    std::string text(static_cast<std::size_t>(count), '\0');
    MPI_Mrecv(text.data(), count, MPI_CHAR, &message, MPI_STATUS_IGNORE);
    const auto from = static_cast<std::size_t>(st.MPI_SOURCE);
    if (answered[from]) continue;  // cannot happen: one status per rank and agreement
    answered[from] = true;
    ++heard;
    const auto j = nlohmann::json::parse(text);
    if (!j.is_null()) status[from] = refusal_from(j);
  }
  std::vector<Refusal> refusals;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", waiter.timeout_s());
  for (int r = 0; r < procs; ++r) {
    const auto k = static_cast<std::size_t>(r);
    if (!answered[k])
      refusals.push_back({r, "", 1,
                          std::string("did not answer within ") + seconds +
                              " s (it stopped, lost its link, or failed before it could say why)"});
    else if (status[k])
      refusals.push_back(*status[k]);
  }
  const bool everyone_knows = heard == procs;
  nlohmann::json verdict = {{"refusals", nlohmann::json::array()},
                            {"everyone_knows", everyone_knows}};
  for (const auto& r : refusals) verdict["refusals"].push_back(to_json(r));
  const std::string text = verdict.dump();
  std::vector<MPI_Request> sends;
  for (int r = 1; r < procs; ++r) {
    if (!answered[static_cast<std::size_t>(r)]) continue;
    sends.emplace_back();
    MPI_Isend(text.data(), as_count(text.size(), "the verdict"), MPI_CHAR, r, verdict_tag, comm,
              &sends.back());
  }
  waiter.wait(sends, "telling every rank whether the job goes on");
  if (!refusals.empty()) throw JobRefused(std::move(refusals), procs, everyone_knows);
}

std::string broadcast_text(const Waiter& waiter, const std::string& text, const std::string& what) {
  const MPI_Comm comm = waiter.comm();
  if (size_of(comm) == 1) return text;
  const bool root = rank_of(comm) == 0;
  long long length = root ? static_cast<long long>(text.size()) : 0;
  std::vector<MPI_Request> req(1);
  MPI_Ibcast(&length, 1, MPI_LONG_LONG, 0, comm, req.data());
  waiter.wait(req, what);
  std::string out = root ? text : std::string(static_cast<std::size_t>(length), '\0');
  req.resize(1);
  MPI_Ibcast(out.data(), as_count(out.size(), "a broadcast"), MPI_CHAR, 0, comm, req.data());
  waiter.wait(req, what);
  return out;
}

std::vector<std::string> gather_text(const Waiter& waiter, const std::string& text,
                                     const std::string& what) {
  const MPI_Comm comm = waiter.comm();
  const int procs = size_of(comm);
  if (procs == 1) return {text};
  const bool root = rank_of(comm) == 0;
  int length = as_count(text.size(), "a gathered text");
  std::vector<int> lengths(root ? static_cast<std::size_t>(procs) : 0);
  std::vector<MPI_Request> req(1);
  MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm, req.data());
  waiter.wait(req, what);
  std::vector<int> offsets(lengths.size(), 0);
  std::size_t total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = as_count(total, "the gathered texts");
    total += static_cast<std::size_t>(lengths[r]);
  }
  std::string all(total, '\0');
  req.resize(1);
  MPI_Igatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
               0, comm, req.data());
  waiter.wait(req, what);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    out.push_back(
        all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return out;
}

}  // namespace einsumdb
