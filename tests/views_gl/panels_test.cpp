// The Dear ImGui panels on a real GL context (xcb under Xvfb, Mesa llvmpipe): each panel is
// shown, its framebuffer grabbed and checked for the colours it must contain, and saved as a
// PNG next to the test binary (and to docs/images with NAUTILUS_UPDATE_GOLDEN=1). Input reaches
// ImGui, an idle panel draws nothing, and floating a dock (a new GL context) keeps drawing.
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QImage>
#include <QMainWindow>
#include <QMouseEvent>
#include <QThread>
#include <QWheelEvent>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>

#include "tests/common/event_loop.h"
#include "tests/common/spec_test_util.h"
#include "tests/views_gl/gl_test_util.h"
#include "views/gl/layout_panel.h"
#include "views/gl/pipeline_panel.h"

namespace nautilus::views {
namespace {

using gl::testing::attention_module;

#define REQUIRE_GL()                                                                          \
  if (!gl_panels_supported()) {                                                               \
    GTEST_SKIP() << "OpenGL panels need an X display (platform " <<                           \
        QGuiApplication::platformName().toStdString() << "): ctest runs them under xvfb-run"; \
  }

using nautilus::testing::wait_until;

// Processes events for `ms` milliseconds.
void pump(int ms) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 10);
    QThread::msleep(2);
  }
}

// Shows `panel` and waits until it has drawn and stopped asking for frames.
void show_and_settle(ImGuiPanel& panel) {
  panel.show();
  ASSERT_TRUE(wait_until([&] { return panel.isVisible() && panel.frames_drawn() > 0; }));
  int64_t frames = -1;
  wait_until([&] {
    const bool stable = frames == panel.frames_drawn();
    frames = panel.frames_drawn();
    pump(60);
    return stable;
  });
}

int distinct_colours(const QImage& image) {
  std::set<QRgb> colours;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) colours.insert(image.pixel(x, y) | 0xFF000000u);
  }
  return static_cast<int>(colours.size());
}

// ImGui's 0xAABBGGRR to Qt's 0xAARRGGBB.
QRgb qt_rgb(uint32_t imgui) {
  return qRgb(static_cast<int>(imgui & 0xFF), static_cast<int>((imgui >> 8) & 0xFF),
              static_cast<int>((imgui >> 16) & 0xFF));
}

int pixels_of(const QImage& image, QRgb colour) {
  int count = 0;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) count += (image.pixel(x, y) | 0xFF000000u) == (colour | 0xFF000000u);
  }
  return count;
}

// Saves next to the test binary; with NAUTILUS_UPDATE_GOLDEN=1 also as docs/images/<name>.
void save(const QImage& image, const QString& name) {
  EXPECT_TRUE(image.save(QDir::current().filePath(name)));
  if (qEnvironmentVariableIntValue("NAUTILUS_UPDATE_GOLDEN") == 1) {
    const QString docs = QStringLiteral(NAUTILUS_SOURCE_DIR "/docs/images");
    QDir().mkpath(docs);
    EXPECT_TRUE(image.save(docs + QLatin1Char('/') + name));
  }
}

void send_mouse_move(QWidget& widget, QPointF at) {
  QMouseEvent move(QEvent::MouseMove, at, widget.mapToGlobal(at), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
  QApplication::sendEvent(&widget, &move);
}

void send_ctrl_wheel(QWidget& widget, QPointF at, int notches) {
  QWheelEvent wheel(at, widget.mapToGlobal(at), QPoint(), QPoint(0, 120 * notches), Qt::NoButton,
                    Qt::ControlModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(&widget, &wheel);
}

TEST(LayoutPanelGL, DrawsTheAccumulatorAsAThreadValueGrid) {
  REQUIRE_GL();
  ASSERT_TRUE(attention_module());
  LayoutPanel panel;
  panel.resize(1100, 660);
  panel.set_module(attention_module());
  ASSERT_TRUE(panel.layout_grid()) << panel.error();
  const auto& choice = panel.tiles()[static_cast<size_t>(panel.tile_index())];
  ASSERT_TRUE(choice.value);
  EXPECT_EQ(choice.value->layout.kind, matile::LayoutKind::MmaC);  // the default picture
  show_and_settle(panel);
  const QImage image = panel.grabFramebuffer();
  ASSERT_FALSE(image.isNull());
  save(image, QStringLiteral("panel-layout.png"));
  EXPECT_GT(distinct_colours(image), 60);
  // The cells of threads 0, 1 and 4 (rows 0 and 1 of the first atom) are on screen in their colours.
  for (int64_t thread : {0, 1, 4}) {
    EXPECT_GT(pixels_of(image, qt_rgb(gl::thread_colour(thread, gl::ColourBy::Thread))), 200) << thread;
  }
}

TEST(LayoutPanelGL, SaysWhyTheSelectedTileHasItsLayout) {
  REQUIRE_GL();
  // LayerNorm's statistics kernel, lowered as the studio lowers it (record_layout_reasons): the
  // carried sum's layout is the synthesis' pin, not the rules' blocked default, and the panel
  // says so under the tile's layout; an accumulator-free element-wise tile names its rule.
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.record_layout_reasons = true;
  const driver::Compilation compiled = nautilus::testing::compile_scheduled(
      "assets/specs/layernorm.nt", nautilus::testing::hand_schedule("layernorm"), {"T=8", "H=2048"}, options);
  ASSERT_TRUE(compiled.ok()) << compiled.schedule_error << compiled.internal_error;
  LayoutPanel panel;
  panel.set_module(compiled.ma_module);
  int stats = -1;
  for (size_t k = 0; k < compiled.ma_module->kernels.size(); ++k) {
    if (compiled.ma_module->kernels[k]->name == "Var_sum") stats = static_cast<int>(k);
  }
  ASSERT_GE(stats, 0);
  ASSERT_TRUE(panel.select_kernel(stats));
  ASSERT_TRUE(panel.select_tile("Mu_sum_i")) << panel.error();
  EXPECT_NE(panel.tile_text().find("why: synthesis: "), std::string::npos) << panel.tile_text();
  EXPECT_NE(panel.tile_text().find("instead of the rules' blocked"), std::string::npos) << panel.tile_text();
  EXPECT_NE(panel.tile_text().find("layout synthesis: register layouts cost"), std::string::npos) << panel.tile_text();
  ASSERT_TRUE(panel.select_tile("24")) << panel.error();
  EXPECT_NE(panel.tile_text().find("why: element-wise: its first placed operand %X's"), std::string::npos)
      << panel.tile_text();
}

TEST(LayoutPanelGL, SwizzledBanksHaveNoConflictOutlinesAndUnswizzledOnesDo) {
  REQUIRE_GL();
  LayoutPanel panel;
  panel.resize(1100, 660);
  panel.set_module(attention_module());
  ASSERT_TRUE(panel.select_tile("K_smem"));
  int ldmatrix = -1;
  for (size_t i = 0; i < panel.access_patterns().size() && ldmatrix < 0; ++i) {
    if (panel.access_patterns()[i].instruction.rfind("ldmatrix", 0) == 0) ldmatrix = static_cast<int>(i);
  }
  ASSERT_GE(ldmatrix, 0);
  ASSERT_TRUE(panel.select_access(ldmatrix));
  ASSERT_TRUE(panel.bank_grid()) << panel.error();
  panel.set_cell_size(26);
  show_and_settle(panel);
  const QImage swizzled = panel.grabFramebuffer();
  save(swizzled, QStringLiteral("panel-layout-banks.png"));
  int banks_seen = 0;
  for (int bank = 0; bank < 32; ++bank) banks_seen += pixels_of(swizzled, qt_rgb(gl::bank_colour(bank))) > 50;
  EXPECT_EQ(banks_seen, 32);
  const QRgb red = qRgb(220, 30, 30);
  EXPECT_EQ(pixels_of(swizzled, red), 0);

  panel.set_show_unswizzled(true);
  ASSERT_TRUE(panel.bank_grid());
  EXPECT_GT(panel.bank_grid()->conflicts(), 0);
  show_and_settle(panel);
  const QImage plain = panel.grabFramebuffer();
  save(plain, QStringLiteral("panel-layout-banks-unswizzled.png"));
  EXPECT_GT(pixels_of(plain, red), 500);  // the phase's 8x8 matrix outlined in red
}

// The warp-specialized attention's S accumulator (the wgmma accumulator of the consumer role's two
// warpgroups), coloured by warpgroup: the top 64 rows in warpgroup 0's colour, the bottom 64 in
// warpgroup 1's; the label names the statement, the wgmma use and the role.
TEST(LayoutPanelGL, DrawsTheWgmmaAccumulatorOfEachConsumerWarpgroup) {
  REQUIRE_GL();
  ASSERT_TRUE(gl::testing::warp_specialized_attention_module());
  LayoutPanel panel;
  panel.resize(900, 1450);
  panel.set_statement_names(gl::testing::attention_statement_names());
  panel.set_module(gl::testing::warp_specialized_attention_module());
  ASSERT_TRUE(panel.select_tile("27"));
  const gl::TileChoice& choice = panel.tiles()[static_cast<size_t>(panel.tile_index())];
  EXPECT_EQ(choice.statement, "S");
  EXPECT_EQ(choice.use, "wgmma accumulator");
  EXPECT_EQ(choice.role, "consumers");
  ASSERT_TRUE(panel.layout_grid()) << panel.error();
  panel.set_colour_by(gl::ColourBy::Warpgroup);
  panel.set_cell_size(10);  // all 128 rows
  show_and_settle(panel);
  const QImage image = panel.grabFramebuffer();
  save(image, QStringLiteral("panel-layout-wgmma.png"));
  EXPECT_GT(pixels_of(image, qt_rgb(gl::thread_colour(0, gl::ColourBy::Warpgroup))), 2000);
  EXPECT_GT(pixels_of(image, qt_rgb(gl::thread_colour(128, gl::ColourBy::Warpgroup))), 2000);
}

TEST(PipelinePanelGL, DrawsTheWarpsCopiesAndMmas) {
  REQUIRE_GL();
  PipelinePanel panel;
  panel.resize(1200, 360);
  panel.set_module(attention_module());
  ASSERT_EQ(panel.timeline().error, "");
  panel.set_zoom(100.0f * 1050.0f / static_cast<float>(panel.timeline().total_cycles));  // fit
  show_and_settle(panel);
  const QImage image = panel.grabFramebuffer();
  save(image, QStringLiteral("panel-pipeline.png"));
  EXPECT_GT(distinct_colours(image), 30);
  // mma, element-wise and cp.async issue bars are drawn in their class colours.
  EXPECT_GT(pixels_of(image, qRgb(255, 138, 101)), 1000);  // mma
  EXPECT_GT(pixels_of(image, qRgb(129, 199, 132)), 500);   // softmax / element-wise
  EXPECT_GT(pixels_of(image, qRgb(77, 182, 172)), 20);     // cp.async (legend and issue bars)
  // The identical warps share one row until the user asks for one row per warp.
  const int copy_rows = static_cast<int>(panel.timeline().rows.size()) - attention_module()->kernels[0]->warps;
  EXPECT_EQ(panel.shown_rows(), 1 + copy_rows);
  panel.set_group_identical_warps(false);
  EXPECT_EQ(panel.shown_rows(), static_cast<int>(panel.timeline().rows.size()));
  show_and_settle(panel);
  save(panel.grabFramebuffer(), QStringLiteral("panel-pipeline-warps.png"));
}

// The warp-specialized attention kernel by role: one row for the TMA producer and one per
// consumer warpgroup, the K/V stages' rows, phase strips on the role rows, and the stages handed
// over by arrows (a landing TMA box fills a stage, the consumers' arrival releases it).
TEST(PipelinePanelGL, DrawsTheWarpSpecializedKernelByRole) {
  REQUIRE_GL();
  ASSERT_TRUE(gl::testing::warp_specialized_attention_module());
  PipelinePanel panel;
  panel.resize(1400, 520);
  panel.set_module(gl::testing::warp_specialized_attention_module());
  ASSERT_EQ(panel.timeline().error, "");
  std::vector<std::string> shown;
  for (size_t r = 0; r < panel.timeline().rows.size(); ++r) {
    if (panel.timeline().rows[r].kind == cost::TimelineRow::Kind::Warp &&
        panel.row_names()[r] != panel.timeline().rows[r].name) {
      shown.push_back(panel.row_names()[r]);
    }
  }
  EXPECT_EQ(shown, (std::vector<std::string>{"producer (warps 0-3)", "consumers wg0 (warps 4-7)",
                                             "consumers wg1 (warps 8-11)"}));
  EXPECT_EQ(panel.shown_rows(), 3 + static_cast<int>(panel.timeline().rows.size()) - 12);
  ASSERT_FALSE(panel.timeline().handoffs.empty());
  panel.set_zoom(100.0f * 1250.0f / static_cast<float>(panel.timeline().total_cycles));  // fit
  show_and_settle(panel);
  const QImage image = panel.grabFramebuffer();
  save(image, QStringLiteral("panel-pipeline-roles.png"));
  EXPECT_GT(pixels_of(image, qRgb(255, 138, 101)), 500);  // wgmma bars and tensor-core phases
  EXPECT_GT(pixels_of(image, qRgb(129, 199, 132)), 500);  // softmax bars and phases
  EXPECT_GT(pixels_of(image, qRgb(0, 137, 123)), 20);     // "stage filled" hand-offs
  EXPECT_GT(pixels_of(image, qRgb(230, 81, 0)), 20);      // "stage released" hand-offs
}

// The solver tab: Z3 runs on the panel's worker (the call returns at once and the answer comes
// through the event loop), the modulo reservation table and the per-role timeline are drawn, a
// role pin the model cannot meet comes back infeasible with the solver's explanation, and
// clearing it restores the schedule.
TEST(PipelinePanelGL, SolverTabSolvesOnItsWorkerAndExplainsInfeasiblePins) {
  REQUIRE_GL();
  const matile::ModulePtr module = gl::testing::compile_to_matile(
      "gemm", {"M=256", "N=256", "K=512"},
      {"tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)", "bind(C_sum, m_o=grid.y, n_o=grid.x)",
       "warp_spec(C_sum, consumers=2, stages=4)"},
      "sm_90a");
  ASSERT_TRUE(module);
  PipelinePanel panel;
  panel.resize(1400, 1000);
  panel.set_module(module);
  panel.show_tab(PipelinePanel::Tab::Solver);
  EXPECT_TRUE(panel.solving()) << "the solve runs on the worker, after show_tab returned";
  EXPECT_FALSE(panel.solution());
  ASSERT_TRUE(wait_until([&] { return panel.solves_delivered() == 1 && !panel.solving(); }, 60'000));
  ASSERT_TRUE(panel.solution() && panel.solver_graph()) << panel.solver_error();
  const pipeline::Solution& solved = *panel.solution();
  ASSERT_EQ(solved.status, pipeline::SolveStatus::Optimal) << solved.summary;
  EXPECT_EQ(panel.modulo_table().ii_rows, solved.ii_slots);
  ASSERT_FALSE(panel.role_timeline().roles.empty());
  EXPECT_EQ(panel.role_timeline().roles[0], "producer");
  EXPECT_FALSE(panel.role_timeline().handoffs.empty());
  show_and_settle(panel);
  QImage image = panel.grabFramebuffer();
  save(image, QStringLiteral("panel-pipeline-solver.png"));
  // The table's cells are coloured by role: the consumer's wgmmas fill the tensor core's rows.
  std::string wgmma;
  for (const pipeline::Node& node : panel.solver_graph()->nodes) {
    if (node.kind == pipeline::NodeKind::Wgmma && wgmma.empty()) wgmma = node.name;
  }
  ASSERT_FALSE(wgmma.empty());
  EXPECT_GT(pixels_of(image, qRgb(255, 183, 77)), 500);  // consumer0's colour

  // A wgmma pinned on the producer breaks the rule that the producer only copies.
  panel.pin_role(wgmma, "producer");
  ASSERT_TRUE(wait_until([&] { return panel.solves_delivered() == 2 && !panel.solving(); }, 60'000));
  ASSERT_TRUE(panel.solution());
  EXPECT_EQ(panel.solution()->status, pipeline::SolveStatus::Infeasible) << panel.solution()->summary;
  bool named = false;
  for (const std::string& line : panel.solution()->explanation) named = named || line.find("pinned: " + wgmma) != std::string::npos;
  EXPECT_TRUE(named) << panel.solution()->summary;
  EXPECT_EQ(panel.modulo_table().ii_rows, 0);
  show_and_settle(panel);
  save(panel.grabFramebuffer(), QStringLiteral("panel-pipeline-solver-infeasible.png"));

  panel.clear_pins();
  ASSERT_TRUE(wait_until([&] { return panel.solves_delivered() == 3 && !panel.solving(); }, 60'000));
  EXPECT_EQ(panel.solution()->status, pipeline::SolveStatus::Optimal);
  EXPECT_TRUE(panel.solution()->cached) << "the same problem again comes from the panel's cache";
}

// The solver's answer for the warp-specialized attention with two consumer warpgroups pinned:
// the TMA producer and two consumers, each owning one 64-row half (its GEMMs and its softmax),
// and the tensor core's rows of the modulo reservation table shared by both consumers -- the
// ping-pong FlashAttention-3 hand-schedules.
TEST(PipelinePanelGL, SolverTabShowsAttentionsTwoConsumerWarpgroups) {
  REQUIRE_GL();
  ASSERT_TRUE(gl::testing::warp_specialized_attention_module());
  PipelinePanel panel;
  panel.resize(1500, 1250);
  panel.set_module(gl::testing::warp_specialized_attention_module());
  panel.set_solver_time_limit(60);
  panel.set_consumers(2);
  panel.show_tab(PipelinePanel::Tab::Solver);
  ASSERT_TRUE(wait_until([&] { return !panel.solving() && panel.solution(); }, 120'000));
  const pipeline::Solution& s = *panel.solution();
  ASSERT_TRUE(s.status == pipeline::SolveStatus::Optimal || s.status == pipeline::SolveStatus::BestFound) << s.summary;
  EXPECT_EQ(panel.role_timeline().roles, (std::vector<std::string>{"producer", "consumer0", "consumer1"}));
  const pipeline::Graph& graph = *panel.solver_graph();
  std::set<int> tensor_core_roles;
  for (const pipeline::Reservation& r : panel.modulo_table().reservations) {
    if (r.unit == pipeline::Unit::TensorCore) tensor_core_roles.insert(r.role);
  }
  EXPECT_EQ(tensor_core_roles, (std::set<int>{1, 2})) << "both consumers take turns on the tensor core";
  // One consumer per half: all of a 64-row sub-tile's ops on one role.
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    if (graph.nodes[v].subtile < 0) continue;
    for (size_t w = 0; w < graph.nodes.size(); ++w) {
      if (graph.nodes[w].subtile == graph.nodes[v].subtile) {
        EXPECT_EQ(s.ops[v].role, s.ops[w].role) << graph.nodes[v].name << " " << graph.nodes[w].name;
      }
    }
  }
  show_and_settle(panel);
  const QImage image = panel.grabFramebuffer();
  save(image, QStringLiteral("panel-pipeline-solver-attention.png"));
  EXPECT_GT(pixels_of(image, qRgb(255, 183, 77)), 500);  // consumer0's rows of the table
  EXPECT_GT(pixels_of(image, qRgb(100, 181, 246)), 500);  // consumer1's

  // "Use in schedule" hands over the decision that realizes the answer on the kernel's block.
  std::string why;
  EXPECT_FALSE(panel.use_solution()) << "no callback: nothing to hand it to";
  EXPECT_FALSE(panel.realizing_decision(&why)) << "no block known for the kernel";
  panel.set_kernel_blocks({{"O_sum_acc", "O"}});
  std::vector<sched::Decision> used;
  panel.set_use_decision([&](const sched::Decision& d) { used.push_back(d); });
  ASSERT_TRUE(panel.use_solution());
  ASSERT_EQ(used.size(), 1u);
  EXPECT_EQ(used[0].kind, "pipeline");
  EXPECT_EQ(used[0].target, "O_sum_acc");
  ASSERT_TRUE(used[0].find("consumers"));
  EXPECT_EQ(used[0].find("consumers")->as_int(), 2);
  EXPECT_GE(used[0].find("stages")->as_int(), s.stages);
}

// A solve that would take its whole time limit (attention with any number of consumers: 20 s) is
// stopped when the panel goes away, so closing the window does not wait for Z3.
TEST(PipelinePanelGL, ClosingThePanelStopsTheSolveInFlight) {
  REQUIRE_GL();
  ASSERT_TRUE(gl::testing::warp_specialized_attention_module());
  auto panel = std::make_unique<PipelinePanel>();
  panel->set_module(gl::testing::warp_specialized_attention_module());
  panel->solve();
  pump(300);
  ASSERT_TRUE(panel->solving());
  QElapsedTimer timer;
  timer.start();
  panel.reset();
  EXPECT_LT(timer.elapsed(), 5000);
}

TEST(ImGuiPanelGL, AnIdlePanelDrawsNoFramesUntilInputOrData) {
  REQUIRE_GL();
  PipelinePanel panel;
  panel.resize(800, 400);
  panel.set_module(attention_module());
  show_and_settle(panel);
  const int64_t idle = panel.frames_drawn();
  pump(400);
  EXPECT_EQ(panel.frames_drawn(), idle) << "frames drawn without input";
  send_mouse_move(panel, QPointF(300, 200));
  pump(200);
  EXPECT_GT(panel.frames_drawn(), idle);
  const int64_t after_input = panel.frames_drawn();
  panel.set_iterations(2);
  pump(200);
  EXPECT_GT(panel.frames_drawn(), after_input);
}

TEST(ImGuiPanelGL, CtrlWheelReachesImGuiAndZooms) {
  REQUIRE_GL();
  LayoutPanel layout;
  layout.resize(800, 500);
  layout.set_module(attention_module());
  show_and_settle(layout);
  const float cell = layout.cell_size();
  const QPointF inside(400, 350);  // over the grid
  send_mouse_move(layout, inside);
  pump(100);
  send_ctrl_wheel(layout, inside, 2);
  pump(200);
  EXPECT_GT(layout.cell_size(), cell * 1.2f);

  PipelinePanel pipeline;
  pipeline.resize(800, 400);
  pipeline.set_module(attention_module());
  show_and_settle(pipeline);
  const float zoom = pipeline.zoom();
  send_mouse_move(pipeline, QPointF(400, 250));
  pump(100);
  send_ctrl_wheel(pipeline, QPointF(400, 250), -2);
  pump(200);
  EXPECT_LT(pipeline.zoom(), zoom / 1.2f);
}

TEST(ImGuiPanelGL, FloatingTheDockRecreatesTheGlContextAndKeepsDrawing) {
  REQUIRE_GL();
  QMainWindow window;
  auto* dock = new QDockWidget(QStringLiteral("Layouts"), &window);
  auto* panel = new LayoutPanel(dock);
  panel->set_module(attention_module());
  dock->setWidget(panel);
  window.addDockWidget(Qt::BottomDockWidgetArea, dock);
  window.resize(1000, 700);
  window.show();
  ASSERT_TRUE(wait_until([&] { return panel->frames_drawn() > 0; }));
  EXPECT_GT(distinct_colours(panel->grabFramebuffer()), 60);
  dock->setFloating(true);
  dock->resize(700, 500);
  pump(300);
  EXPECT_GT(distinct_colours(panel->grabFramebuffer()), 60);
  dock->setFloating(false);
  pump(300);
  EXPECT_GT(distinct_colours(panel->grabFramebuffer()), 60);
}

TEST(ImGuiPanelGL, PanelsWithoutAModuleSaySo) {
  REQUIRE_GL();
  PipelinePanel panel;
  panel.resize(600, 200);
  show_and_settle(panel);
  const QImage image = panel.grabFramebuffer();
  EXPECT_GE(distinct_colours(image), 2);  // background and the message's text
  matile::Builder builder(4);
  builder.barrier();
  auto module = std::make_shared<matile::Module>();
  module->kernels.push_back(builder.finish_kernel("flat", {}));
  panel.set_module(module);
  EXPECT_NE(panel.timeline().error.find("has no loop"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::views
