// A batch: `qconv convert --out-dir DIR IN... [-j N]`, many conversions in one process.
//
// Each item is converted exactly as a lone `qconv convert IN DIR/<IN's file name>` would be
// (convertItem, the same code), so each output is byte-identical to a lone conversion's; what
// the items share is only what does not change the result: the checker's schemas (built once),
// the stderr sink (one line at a time) and the commit gate. An item that fails leaves no output,
// says why on stderr and in the report, and the batch goes on; the batch's exit code is the
// greatest of its items'.
//
// Signals, in the qconv command (ConvertOptions::own_signals): a lone run blocks SIGTERM,
// SIGINT, SIGHUP and SIGQUIT in its commit; a batch has several threads, and a signal goes to
// any thread that does not block it. So every thread of a batch blocks them, and the batch's own
// thread reads them from a signalfd: on one, it takes the commit gate exclusively (waits for the
// commits under way, lets no other start), then dies of that signal as a lone run would, with
// every output a whole old or new pair. In the library (the Python API) the host owns its
// signals: the batch touches none of them, and the caller cancels through ConvertOptions::cancel
// instead (the items not committed yet commit nothing).
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <map>
#include <optional>
#include <thread>

#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/item.h"
#include "qconv/pipeline/progress.h"
#include "qconv/pipeline/write_plan.h"

namespace qconv {

std::string batchOutput(const std::string& out_dir, const std::string& input) {
  return out_dir + "/" + io::splitPath(input).base;
}

namespace {

/// The batch's outputs: DIR/<each input's file name>. Error(Usage) when the batch cannot start.
std::vector<std::string> outputsOf(const ConvertOptions& options) {
  if (options.inputs.empty()) throw Error(ExitCode::Usage, "--out-dir: give the models to convert after it");
  if (options.dump) throw Error(ExitCode::Usage, "--dump prints one conversion's IR: it does not go with --out-dir");
  struct stat st {};
  if (stat(options.out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(ExitCode::Usage, fmt::format("{}: --out-dir names no folder", options.out_dir));
  std::vector<std::string> outputs;
  std::map<std::string, const std::string*> first;  // output file name -> the input that has it
  for (const std::string& in : options.inputs) {
    const io::PathParts parts = io::splitPath(in);
    const std::string& base = parts.base;
    if (!parts.namesFile())
      throw Error(ExitCode::Usage, fmt::format("'{}': an input names a folder or nothing", in));
    if (auto [it, fresh] = first.emplace(base, &in); !fresh)
      throw Error(ExitCode::Usage, fmt::format("{} and {} would both be written to {}/{}: convert them in two batches",
                                               *it->second, in, options.out_dir, base));
    outputs.push_back(batchOutput(options.out_dir, in));
  }
  return outputs;
}

/// The interrupting signals blocked in this thread (and so in the threads it starts) and read
/// from a descriptor instead, for as long as it lives; an eventfd says the workers are done.
class BatchSignals {
 public:
  BatchSignals() {
    sigemptyset(&set_);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    signals_ = signalfd(-1, &set_, SFD_CLOEXEC);
    done_ = eventfd(0, EFD_CLOEXEC);
    if (signals_ < 0 || done_ < 0) throw Error(ExitCode::Internal, fmt::format("batch: {}", sysError()));
  }
  ~BatchSignals() {
    close(signals_);
    close(done_);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  BatchSignals(const BatchSignals&) = delete;
  BatchSignals& operator=(const BatchSignals&) = delete;

  void workersDone() const {
    const uint64_t one = 1;
    (void)!write(done_, &one, sizeof one);
  }

  /// Until workersDone(); on a signal meanwhile, take `gate` and die of it.
  void wait(std::shared_mutex& gate) const {
    for (;;) {
      pollfd fds[2] = {{signals_, POLLIN, 0}, {done_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) continue;  // EINTR
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info {};
        if (read(signals_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) die(static_cast<int>(info.ssi_signo), gate);
      }
      if (fds[1].revents & POLLIN) return;
    }
  }

 private:
  [[noreturn]] void die(int signal, std::shared_mutex& gate) const {
    gate.lock();  // no commit under way, none to start
    std::signal(signal, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(signal);
    std::_Exit(128 + signal);  // only if the signal was caught elsewhere and returned
  }

  sigset_t set_, old_;
  int signals_ = -1, done_ = -1;
};

}  // namespace

int runBatch(const ConvertOptions& options, std::ostream& out, DiagnosticSink& err, RunReport& report,
             std::shared_ptr<const io::Folder>& report_folder) {
  std::vector<std::string> outputs;
  WritePlan plan;  // one listing of DIR for every commit's sweep, and what every item reads
  try {
    checkFlags(options);
    outputs = outputsOf(options);
    plan = planWrites(options.inputs, outputs, options.report);
    report_folder = plan.report_folder;
  } catch (const Error& e) {
    Diagnostics(&err, options.verbosity).error(e.what());
    return static_cast<int>(e.code());
  }
  const size_t n = outputs.size();
  report.items.resize(n);
  const io::OpSchemas schemas;
  std::shared_mutex gate;
  std::atomic<size_t> next{0};
  const size_t workers = std::min(n, static_cast<size_t>(std::max(options.jobs, 1)));
  std::atomic<size_t> running{workers};
  std::optional<BatchSignals> signals;
  if (options.own_signals) signals.emplace();
  std::atomic<size_t> done{0};
  const Progress shown(err, options.progress, std::chrono::milliseconds(options.progress_delay_ms), [&](double seconds) {
    return fmt::format("qconv: batch: {} of {} models done ({:.1f} s)", done.load(), n, seconds);
  });
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) {
        convertItem(options, Item{options.inputs[i], outputs[i], schemas, &gate, true, &plan.protected_files,
                                  &plan.sweep_names[i], plan.folders[i]},
                    report.items[i], err, out);  // cancelled: it says so and commits nothing
        ++done;
      }
      if (running.fetch_sub(1) == 1 && signals) signals->workersDone();
    });
  if (signals) signals->wait(gate);
  for (auto& t : threads) t.join();
  int code = 0;
  size_t failed = 0;
  for (const ItemReport& r : report.items) {
    code = std::max(code, r.exit_code);
    failed += r.exit_code != 0;
  }
  // the batch's total: one line at every verbosity, -q too
  Diagnostics(&err, options.verbosity)
      .always(failed ? Level::Error : Level::Info, "batch",
              fmt::format("batch: {} of {} model{} converted into {}{}", n - failed, n, n == 1 ? "" : "s", options.out_dir,
                          failed ? fmt::format(", {} failed (exit {})", failed, code) : ""));
  return code;
}

}  // namespace qconv
