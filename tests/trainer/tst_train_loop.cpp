// The SFT loop end to end on a tiny Qwen2 model: learning, exact resume, accumulation,
// activation checkpointing, checkpoints and the run's events.
#include <QRegularExpression>
#include <QtTest>
#include <QJsonDocument>
#include <QJsonObject>

#include <filesystem>

#include "studio/runs/events.h"
#include "studio/model_facts/model_info.h"
#include "studio/trainer/checkpoint.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/train_loop.h"

using namespace studio::trainer;
namespace fs = std::filesystem;

namespace {

const std::string kConfig = STUDIO_TEST_FIXTURES_DIR "/models/tiny-qwen2/config.json";

std::vector<TokenizedSample> memorisation_samples(int count, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<TokenizedSample> out;
  for (int i = 0; i < count; ++i) {
    const int64_t len = 10 + (i * 7) % 9;
    auto ids = torch::randint(3, 64, {len}, torch::kLong);
    TokenizedSample s;
    s.input_ids.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + len);
    s.labels = s.input_ids;
    for (int k = 0; k < 3; ++k) s.labels[static_cast<size_t>(k)] = kIgnoreIndex;  // a "prompt"
    out.push_back(std::move(s));
  }
  return out;
}

struct Fixture {
  QTemporaryDir tmp;
  std::string model_dir;
  Fixture() {
    model_dir = tmp.filePath("model").toStdString();
    init_model_folder(kConfig, model_dir, 1);
  }
  TrainInputs inputs(const std::string& out, int64_t steps) const {
    TrainInputs in;
    in.model_dir = model_dir;
    std::string error;
    in.model = *studio::read_model_info(model_dir, error);
    in.train = memorisation_samples(8, 5);
    in.pad_id = 0;
    auto& c = in.config;
    c.output_dir = tmp.filePath(QString::fromStdString(out)).toStdString();
    c.learning_rate = 5e-3;
    c.lr_scheduler_type = studio::LrScheduler::Cosine;
    c.warmup_steps = 2;
    c.max_steps = steps;
    c.logging_steps = 1;
    c.save_steps = 1000;
    c.per_device_train_batch_size = 2;
    c.gradient_accumulation_steps = 2;
    c.gradient_checkpointing = false;
    c.weight_decay = 0.01;
    return in;
  }
};

// DPO pairs from the same random tokens: a shared 4-token prompt, two different 6..9-token answers.
std::vector<studio::data::PairSample> preference_pairs(int count, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<studio::data::PairSample> out;
  for (int i = 0; i < count; ++i) {
    auto make = [](const torch::Tensor& prompt, int64_t answer_len) {
      auto ids = torch::cat({prompt, torch::randint(3, 64, {answer_len}, torch::kLong)});
      TokenizedSample s;
      s.input_ids.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.size(0));
      s.labels = s.input_ids;
      for (int64_t k = 0; k < prompt.size(0); ++k) s.labels[static_cast<size_t>(k)] = kIgnoreIndex;
      return s;
    };
    auto prompt = torch::randint(3, 64, {4}, torch::kLong);
    studio::data::PairSample p;
    p.chosen = make(prompt, 6 + i % 4);
    p.rejected = make(prompt, 6 + (i + 1) % 4);
    p.prompt_len = 4;
    out.push_back(std::move(p));
  }
  return out;
}

// |a - b| <= rel * max(1, |b|) at every step.
void compare_relative(const std::vector<double>& a, const std::vector<double>& b, double rel) {
  QCOMPARE(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    QVERIFY2(std::fabs(a[i] - b[i]) <= rel * std::max(1.0, std::fabs(b[i])),
             qPrintable(QString("step %1: %2 vs %3 (relative tolerance %4)").arg(i + 1)
                            .arg(a[i], 0, 'g', 8).arg(b[i], 0, 'g', 8).arg(rel)));
}

void compare_losses(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  QCOMPARE(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    QVERIFY2(std::fabs(a[i] - b[i]) <= tol,
             qPrintable(QString("step %1: %2 vs %3").arg(i + 1).arg(a[i], 0, 'g', 12)
                            .arg(b[i], 0, 'g', 12)));
}

}  // namespace

class TestTrainLoop : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void lossFallsOnMemorisation();
  void resumeContinuesIdentically();
  void accumulationEqualsOneBigBatch();
  void activationCheckpointingGivesSameLosses();
  void eventsStatusAndFinalModel();
  void saveTotalLimitKeepsNewest();
  void evaluationRunsEveryEvalSteps();
  void bf16TracksFp32_data();
  void bf16TracksFp32();
  void unimplementedPrecisionIsRefused_data();
  void unimplementedPrecisionIsRefused();
  void flashAttnDisabledPinsTheMathPath();
};

void TestTrainLoop::lossFallsOnMemorisation() {
  Fixture f;
  auto in = f.inputs("out", 60);
  in.config.learning_rate = 1e-2;
  Trainer t(in);
  const TrainResult r = t.run();
  QCOMPARE(r.steps, int64_t{60});
  QCOMPARE(QString::fromStdString(r.final_state), QStringLiteral("finished"));
  const double first = r.step_losses.front();
  double last = 0;
  for (size_t i = r.step_losses.size() - 5; i < r.step_losses.size(); ++i) last += r.step_losses[i] / 5;
  QVERIFY2(first > 3.5, qPrintable(QString::number(first)));  // ~ln(64) at random init
  QVERIFY2(last < 0.5 * first, qPrintable(QString("first %1, last %2").arg(first).arg(last)));
}

void TestTrainLoop::resumeContinuesIdentically() {
  Fixture f;
  auto straight = f.inputs("straight", 10);
  straight.config.save_steps = 5;
  const TrainResult a = Trainer(straight).run();

  auto first = f.inputs("resumed", 10);
  first.config.save_steps = 5;
  std::atomic<bool> stop{false};
  first.on_step = [&](int64_t step, double) { stop = step >= 5; };
  const TrainResult b1 = Trainer(first).run(&stop);
  QCOMPARE(QString::fromStdString(b1.final_state), QStringLiteral("stopped"));
  QCOMPARE(b1.steps, int64_t{5});
  QVERIFY(fs::exists(first.config.output_dir + "/checkpoint-5/optimizer-00000-of-00001.safetensors"));

  auto second = f.inputs("resumed", 10);
  second.config.save_steps = 5;
  const TrainResult b2 = Trainer(second).run();  // continues from checkpoint-5 on its own
  QCOMPARE(b2.steps, int64_t{10});
  std::vector<double> joined = b1.step_losses;
  joined.insert(joined.end(), b2.step_losses.begin(), b2.step_losses.end());
  compare_losses(joined, a.step_losses, 1e-6);
}

void TestTrainLoop::accumulationEqualsOneBigBatch() {
  Fixture f;
  auto big = f.inputs("big", 4);
  big.config.per_device_train_batch_size = 4;
  big.config.gradient_accumulation_steps = 1;
  auto small = f.inputs("small", 4);
  small.config.per_device_train_batch_size = 1;
  small.config.gradient_accumulation_steps = 4;
  compare_losses(Trainer(small).run().step_losses, Trainer(big).run().step_losses, 2e-5);
}

void TestTrainLoop::activationCheckpointingGivesSameLosses() {
  Fixture f;
  auto plain = f.inputs("plain", 5);
  auto ckpt = f.inputs("ckpt", 5);
  ckpt.config.gradient_checkpointing = true;
  compare_losses(Trainer(ckpt).run().step_losses, Trainer(plain).run().step_losses, 1e-6);
}

void TestTrainLoop::eventsStatusAndFinalModel() {
  Fixture f;
  auto in = f.inputs("events", 6);
  in.config.logging_steps = 2;
  in.config.save_steps = 3;
  Trainer(in).run();
  const std::string out = in.config.output_dir;
  studio::EventFileReader reader(studio::events_path(out));
  auto polled = reader.poll();
  QStringList kinds;
  std::vector<int64_t> saved;
  for (const auto& e : polled.events) {
    const QString kind = QString::fromStdString(e.name());
    // A checkpoint is written while the next steps run: its event comes when it is committed,
    // at the first step boundary after its files are written (checkpoint-6 before the end).
    if (kind == "checkpoint") {
      saved.push_back(e.get<studio::CheckpointEvent>()->step);
      if (saved.back() == 6)
        QCOMPARE(int(kinds.count("step")), 3);  // after the last step event
      else
        QVERIFY(kinds.count("step") >= 1);      // after step 2's event, at step 4 or later
      continue;
    }
    // Each background checkpoint's log line: what the step waited, what went on behind it.
    if (kind == "log" &&
        e.get<studio::LogEvent>()->message.rfind("checkpoint ", 0) == 0) {
      QVERIFY2(QString::fromStdString(e.get<studio::LogEvent>()->message)
                   .contains(QRegularExpression("^checkpoint [36]: the step waited [0-9.]+ s for "
                                                "the copies to host memory \\([0-9.]+ MiB on "
                                                "rank 0\\); rank 0 wrote its files in [0-9.]+ s "
                                                "while training went on$")),
               e.get<studio::LogEvent>()->message.c_str());
      continue;
    }
    kinds << kind;
  }
  QCOMPARE(saved, std::vector<int64_t>({3, 6}));
  // The log line is the measured model states (first step).
  QCOMPARE(kinds, QStringList({"start", "log", "step", "step", "step", "end"}));
  const auto* measured = polled.events[1].get<studio::LogEvent>();
  QVERIFY2(QString::fromStdString(measured->message).contains("model states on rank 0"),
           measured->message.c_str());
  const auto* start = polled.events.front().get<studio::StartEvent>();
  QCOMPARE(QString::fromStdString(start->model.architecture), QStringLiteral("Qwen2ForCausalLM"));
  QCOMPARE(start->config["max_steps"].get<int64_t>(), int64_t{6});
  const auto* step = polled.events[2].get<studio::StepEvent>();
  QCOMPARE(step->step, int64_t{2});
  QVERIFY(step->tokens > 0 && step->tokens_per_sec > 0 && step->rss_mib > 0);
  QVERIFY(std::isfinite(step->grad_norm) && step->lr > 0);
  QCOMPARE(QString::fromStdString(polled.events.back().get<studio::EndEvent>()->state),
           QStringLiteral("finished"));
  studio::RunStatus status;
  std::string error;
  QVERIFY2(studio::RunStatus::read(studio::status_path(out), status, error), error.c_str());
  QCOMPARE(status.state, studio::RunState::Finished);
  QCOMPARE(status.exit_code.value_or(-1), 0);

  // The final model in OUTPUT_DIR equals the last checkpoint's weights.
  auto final_model = load_model_folder(out);
  auto last = load_model_folder(out + "/checkpoint-6");
  auto ids = torch::tensor({{5, 9, 11, 40}}, torch::kLong);
  auto pos = torch::arange(4, torch::kLong).unsqueeze(0);
  QVERIFY(torch::equal(final_model->logits(ids, pos), last->logits(ids, pos)));
  QCOMPARE(list_checkpoints(out).size(), size_t{2});
}

void TestTrainLoop::saveTotalLimitKeepsNewest() {
  Fixture f;
  auto in = f.inputs("limit", 8);
  in.config.save_steps = 2;
  in.config.save_total_limit = 2;
  Trainer(in).run();
  auto kept = list_checkpoints(in.config.output_dir);
  QCOMPARE(kept.size(), size_t{2});
  QVERIFY(QString::fromStdString(kept[0]).endsWith("checkpoint-6"));
  QVERIFY(QString::fromStdString(kept[1]).endsWith("checkpoint-8"));
}

void TestTrainLoop::evaluationRunsEveryEvalSteps() {
  Fixture f;
  auto in = f.inputs("eval", 6);
  in.eval = memorisation_samples(3, 9);
  in.config.eval_strategy = studio::EvalStrategy::Steps;
  in.config.eval_steps = 3;
  const TrainResult r = Trainer(in).run();
  QVERIFY(std::isfinite(r.eval_loss));
  studio::EventFileReader reader(studio::events_path(in.config.output_dir));
  int evals = 0;
  for (const auto& e : reader.poll().events) evals += e.kind == studio::EventKind::Eval;
  QCOMPARE(evals, 2);
  const double again = evaluate_model(in.config.output_dir, in.eval, 2, 0);
  QVERIFY2(std::fabs(again - r.eval_loss) < 1e-5, qPrintable(QString("%1 vs %2").arg(again).arg(r.eval_loss)));
}

// The mixed-precision path CUDA runs (bf16 compute, fp32 masters, fp32 gradient accumulation,
// fp32 AdamW), here on the CPU: the same run in bf16 and in fp32 from the same weights. The
// tolerance is bf16's: activations carry 8 significant bits (relative rounding 2^-9 per op), which
// over a 2-layer model and 8 AdamW steps moves the loss by well under 2%; a bf16 sum of the
// accumulated gradients or a bf16 optimizer would drift further with every step.
void TestTrainLoop::bf16TracksFp32_data() {
  QTest::addColumn<bool>("dpo");
  QTest::newRow("sft") << false;
  QTest::newRow("dpo") << true;
}

void TestTrainLoop::bf16TracksFp32() {
  QFETCH(bool, dpo);
  Fixture f;
  auto run = [&](bool bf16) {
    auto in = f.inputs(bf16 ? "bf16" : "fp32", 8);
    if (dpo) {
      in.config.stage = studio::Stage::Dpo;
      in.config.pref_beta = 0.1;
      in.config.learning_rate = 1e-3;
      in.train.clear();
      in.train_pairs = preference_pairs(8, 9);
    }
    in.config.bf16 = bf16;
    const TrainResult r = Trainer(in).run();
    if (r.final_state != "finished") qWarning("%s", r.final_state.c_str());
    return r.step_losses;
  };
  const auto full = run(false), mixed = run(true);
  QCOMPARE(full.size(), size_t{8});
  compare_relative(mixed, full, 0.02);
  // And it is not trivially equal: bf16 compute really ran.
  bool differs = false;
  for (size_t i = 0; i < full.size(); ++i) differs = differs || mixed[i] != full[i];
  QVERIFY2(differs, "bf16 and fp32 gave bit-identical losses: was bf16 applied?");
}

// fp16 (no loss scaling) and pure_bf16 (no bf16 optimizer states) are not implemented: a run
// asking for them stops before training, saying what to use instead.
void TestTrainLoop::unimplementedPrecisionIsRefused_data() {
  QTest::addColumn<QString>("key");
  QTest::newRow("fp16") << "fp16";
  QTest::newRow("pure_bf16") << "pure_bf16";
}

void TestTrainLoop::unimplementedPrecisionIsRefused() {
  QFETCH(QString, key);
  Fixture f;
  auto in = f.inputs("refused", 2);
  (key == "fp16" ? in.config.fp16 : in.config.pure_bf16) = true;
  QString message;
  try {
    Trainer(in).run();
  } catch (const std::exception& e) {
    message = e.what();
  }
  QVERIFY2(message.startsWith(key + ":") && message.contains("use bf16: true"), qPrintable(message));
  // status.json says so, though the run failed before it started.
  QFile status(QString::fromStdString(in.config.output_dir) + "/status.json");
  QVERIFY(status.open(QIODevice::ReadOnly));
  const QByteArray text = status.readAll();
  QVERIFY2(text.contains("failed") && text.contains("use bf16: true"), text.constData());
}

// flash_attn: disabled trains on the math path, auto on ATen's CPU flash kernel: the same
// losses up to rounding, but not the same run bit for bit: the gradients differ in their last
// bits (were the key ignored, they would not). The fp32 losses of a few steps may well agree to
// the bit; the step events' gradient norms (fp64 sums of the fp32 gradients) do not.
void TestTrainLoop::flashAttnDisabledPinsTheMathPath() {
  Fixture f;
  auto math = f.inputs("math", 3), flash = f.inputs("flash", 3);
  math.config.flash_attn = studio::FlashAttn::Disabled;
  const auto a = Trainer(math).run().step_losses;
  const auto b = Trainer(flash).run().step_losses;
  compare_losses(a, b, 1e-5);
  auto grad_norms = [](const studio::trainer::TrainInputs& in) {
    std::vector<double> out;
    QFile ev(QString::fromStdString(in.config.output_dir) + "/events.jsonl");
    if (!ev.open(QIODevice::ReadOnly)) return out;
    for (const QByteArray& line : ev.readAll().split('\n')) {
      const QJsonObject o = QJsonDocument::fromJson(line).object();
      if (o["event"].toString() == "step") out.push_back(o["grad_norm"].toDouble());
    }
    return out;
  };
  const auto ga = grad_norms(math), gb = grad_norms(flash);
  QCOMPARE(ga.size(), a.size());
  QCOMPARE(gb.size(), ga.size());
  bool differs = false;
  for (size_t i = 0; i < ga.size(); ++i) {
    QVERIFY(std::fabs(ga[i] - gb[i]) <= 1e-5 * ga[i]);
    differs |= ga[i] != gb[i];
  }
  QVERIFY2(differs, "flash_attn: disabled gave bit-identical gradients to auto");
}

QTEST_MAIN(TestTrainLoop)
#include "tst_train_loop.moc"
