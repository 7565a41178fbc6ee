#include "views/gl/imgui_panel.h"

#include <QElapsedTimer>
#include <QGuiApplication>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QPalette>
#include <QWheelEvent>

#include <algorithm>
#include <cfloat>

#include <imgui.h>
#include <backends/imgui_impl_opengl3.h>

namespace nautilus::views {
namespace {

// One monotonic clock for every panel's frame times.
int64_t now_ns() {
  static QElapsedTimer timer;
  if (!timer.isValid()) timer.start();
  return timer.nsecsElapsed();
}

// Qt key -> ImGui's named key (pre-1.87: KeyMap[ImGuiKey_X] names an index into KeysDown; the
// panel uses the ImGuiKey value itself as that index). -1 for keys ImGui does not name.
int imgui_key(int qt_key) {
  switch (qt_key) {
    case Qt::Key_Tab: return ImGuiKey_Tab;
    case Qt::Key_Left: return ImGuiKey_LeftArrow;
    case Qt::Key_Right: return ImGuiKey_RightArrow;
    case Qt::Key_Up: return ImGuiKey_UpArrow;
    case Qt::Key_Down: return ImGuiKey_DownArrow;
    case Qt::Key_PageUp: return ImGuiKey_PageUp;
    case Qt::Key_PageDown: return ImGuiKey_PageDown;
    case Qt::Key_Home: return ImGuiKey_Home;
    case Qt::Key_End: return ImGuiKey_End;
    case Qt::Key_Insert: return ImGuiKey_Insert;
    case Qt::Key_Delete: return ImGuiKey_Delete;
    case Qt::Key_Backspace: return ImGuiKey_Backspace;
    case Qt::Key_Space: return ImGuiKey_Space;
    case Qt::Key_Return: return ImGuiKey_Enter;
    case Qt::Key_Escape: return ImGuiKey_Escape;
    case Qt::Key_Enter: return ImGuiKey_KeyPadEnter;
    case Qt::Key_A: return ImGuiKey_A;
    case Qt::Key_C: return ImGuiKey_C;
    case Qt::Key_V: return ImGuiKey_V;
    case Qt::Key_X: return ImGuiKey_X;
    case Qt::Key_Y: return ImGuiKey_Y;
    case Qt::Key_Z: return ImGuiKey_Z;
    default: return -1;
  }
}

void set_modifiers(ImGuiIO& io, Qt::KeyboardModifiers modifiers) {
  io.KeyCtrl = modifiers.testFlag(Qt::ControlModifier);
  io.KeyShift = modifiers.testFlag(Qt::ShiftModifier);
  io.KeyAlt = modifiers.testFlag(Qt::AltModifier);
  io.KeySuper = modifiers.testFlag(Qt::MetaModifier);
}

Qt::CursorShape qt_cursor(ImGuiMouseCursor cursor) {
  switch (cursor) {
    case ImGuiMouseCursor_TextInput: return Qt::IBeamCursor;
    case ImGuiMouseCursor_ResizeAll: return Qt::SizeAllCursor;
    case ImGuiMouseCursor_ResizeNS: return Qt::SizeVerCursor;
    case ImGuiMouseCursor_ResizeEW: return Qt::SizeHorCursor;
    case ImGuiMouseCursor_ResizeNESW: return Qt::SizeBDiagCursor;
    case ImGuiMouseCursor_ResizeNWSE: return Qt::SizeFDiagCursor;
    case ImGuiMouseCursor_Hand: return Qt::PointingHandCursor;
    case ImGuiMouseCursor_NotAllowed: return Qt::ForbiddenCursor;
    default: return Qt::ArrowCursor;
  }
}

}  // namespace

bool gl_panels_supported() {
  const QString platform = QGuiApplication::platformName();
  return platform != QLatin1String("offscreen") && platform != QLatin1String("minimal") &&
         platform != QLatin1String("vnc");
}

ImGuiPanel::ImGuiPanel(QWidget* parent) : QOpenGLWidget(parent) {
  setMouseTracking(true);  // hover tooltips without a pressed button
  setFocusPolicy(Qt::StrongFocus);
  setMinimumSize(200, 120);
}

ImGuiPanel::~ImGuiPanel() {
  if (!context_) return;
  if (renderer_ready_) shutdown_renderer();
  ImGui::DestroyContext(context_);
}

void ImGuiPanel::make_imgui_current() const { ImGui::SetCurrentContext(context_); }

void ImGuiPanel::shutdown_renderer() {
  // Called with a context still alive: from the destructor or when Qt is about to destroy it.
  makeCurrent();
  make_imgui_current();
  ImGui_ImplOpenGL3_Shutdown();
  renderer_ready_ = false;
  font_ratio_ = 0.0;
  doneCurrent();
}

void ImGuiPanel::context_about_to_go() {
  if (renderer_ready_) shutdown_renderer();
}

void ImGuiPanel::request_frames(int frames) {
  frames_wanted_ = std::max(frames_wanted_, frames);
  update();
}

void ImGuiPanel::initializeGL() {
  if (!context_) {
    ImGuiContext* previous = ImGui::GetCurrentContext();
    context_ = ImGui::CreateContext();
    ImGui::SetCurrentContext(context_);
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // window state lives with the widget, never in ./imgui.ini
    io.LogFilename = nullptr;
    io.ConfigWindowsMoveFromTitleBarOnly = true;
    for (int k = 0; k < ImGuiKey_COUNT; ++k) io.KeyMap[k] = k;
    if (previous) ImGui::SetCurrentContext(previous);
  }
  make_imgui_current();
  // GLSL 1.30 runs on every desktop GL >= 3.0 context (Mesa llvmpipe gives 4.5); GLES needs 3.00.
  ImGui_ImplOpenGL3_Init(context()->isOpenGLES() ? "#version 300 es" : "#version 130");
  renderer_ready_ = true;
  // Reparenting (floating a dock) destroys this GL context: free the renderer's objects with it.
  connect(context(), &QOpenGLContext::aboutToBeDestroyed, this, &ImGuiPanel::context_about_to_go,
          Qt::UniqueConnection);
  request_frames();
}

void ImGuiPanel::resizeGL(int, int) { request_frames(); }

void ImGuiPanel::update_fonts(double device_pixel_ratio) {
  if (device_pixel_ratio == font_ratio_) return;
  // The renderer uploads the atlas in its first NewFrame; later ratio changes re-upload here.
  const bool texture_uploaded = font_ratio_ != 0.0;
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  ImFontConfig config;
  config.SizePixels = static_cast<float>(13.0 * device_pixel_ratio);
  io.Fonts->AddFontDefault(&config);
  io.FontGlobalScale = static_cast<float>(1.0 / device_pixel_ratio);
  if (texture_uploaded) {
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
  }
  font_ratio_ = device_pixel_ratio;
}

void ImGuiPanel::update_style() {
  const bool dark = palette().color(QPalette::Window).lightness() < 128;
  if (style_set_ && dark == dark_style_) return;
  if (dark) {
    ImGui::StyleColorsDark();
  } else {
    ImGui::StyleColorsLight();
  }
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0.0f;
  style.FrameRounding = 2.0f;
  style.WindowBorderSize = 0.0f;
  dark_style_ = dark;
  style_set_ = true;
}

void ImGuiPanel::paintGL() {
  if (!renderer_ready_) return;
  make_imgui_current();
  ImGuiIO& io = ImGui::GetIO();
  const double ratio = devicePixelRatioF();
  update_fonts(ratio);
  update_style();
  io.DisplaySize = ImVec2(static_cast<float>(width()), static_cast<float>(height()));
  io.DisplayFramebufferScale = ImVec2(static_cast<float>(ratio), static_cast<float>(ratio));
  const int64_t now = now_ns();
  io.DeltaTime = last_frame_ns_ == 0 ? 1.0f / 60.0f
                                     : std::max(1e-4f, static_cast<float>(now - last_frame_ns_) * 1e-9f);
  last_frame_ns_ = now;

  ImGui_ImplOpenGL3_NewFrame();
  ImGui::NewFrame();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                 ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::Begin("##panel", nullptr, flags);
  draw();
  ImGui::End();
  ImGui::Render();

  QOpenGLFunctions* gl = context()->functions();
  const ImVec4 background = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
  gl->glViewport(0, 0, static_cast<int>(width() * ratio), static_cast<int>(height() * ratio));
  gl->glClearColor(background.x, background.y, background.z, 1.0f);
  gl->glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  ++frames_drawn_;

  if (io.MouseDrawCursor == false) setCursor(qt_cursor(ImGui::GetMouseCursor()));
  // Keep drawing only while ImGui has something left to settle (an input just arrived, a
  // window appeared); then stop until the next event.
  if (frames_wanted_ > 0 && --frames_wanted_ > 0) update();
}

void ImGuiPanel::mouseMoveEvent(QMouseEvent* event) {
  if (!context_) return;
  make_imgui_current();
  ImGui::GetIO().MousePos =
      ImVec2(static_cast<float>(event->position().x()), static_cast<float>(event->position().y()));
  request_frames();
}

void ImGuiPanel::mouse_button(QMouseEvent* event, bool down) {
  if (!context_) return;
  make_imgui_current();
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos =
      ImVec2(static_cast<float>(event->position().x()), static_cast<float>(event->position().y()));
  int button = -1;
  switch (event->button()) {
    case Qt::LeftButton: button = 0; break;
    case Qt::RightButton: button = 1; break;
    case Qt::MiddleButton: button = 2; break;
    default: break;
  }
  if (button >= 0) io.MouseDown[button] = down;
  set_modifiers(io, event->modifiers());
  request_frames(3);  // press, release and the state they leave behind
}

void ImGuiPanel::mousePressEvent(QMouseEvent* event) { mouse_button(event, true); }
void ImGuiPanel::mouseReleaseEvent(QMouseEvent* event) { mouse_button(event, false); }
void ImGuiPanel::mouseDoubleClickEvent(QMouseEvent* event) { mouse_button(event, true); }

void ImGuiPanel::wheelEvent(QWheelEvent* event) {
  if (!context_) return;
  make_imgui_current();
  ImGuiIO& io = ImGui::GetIO();
  // One notch (120 eighths of a degree) scrolls one ImGui step.
  io.MouseWheel += static_cast<float>(event->angleDelta().y()) / 120.0f;
  io.MouseWheelH += static_cast<float>(event->angleDelta().x()) / 120.0f;
  set_modifiers(io, event->modifiers());
  request_frames();
  event->accept();
}

bool ImGuiPanel::key(QKeyEvent* event, bool down) {
  if (!context_) return false;
  make_imgui_current();
  ImGuiIO& io = ImGui::GetIO();
  set_modifiers(io, event->modifiers());
  const int k = imgui_key(event->key());
  if (k >= 0) io.KeysDown[k] = down;
  if (down && !event->text().isEmpty() && event->text().at(0).isPrint()) {
    io.AddInputCharactersUTF8(event->text().toUtf8().constData());
  }
  request_frames();
  return k >= 0 || io.WantCaptureKeyboard;
}

void ImGuiPanel::keyPressEvent(QKeyEvent* event) {
  if (!key(event, true)) QOpenGLWidget::keyPressEvent(event);
}

void ImGuiPanel::keyReleaseEvent(QKeyEvent* event) {
  if (!key(event, false)) QOpenGLWidget::keyReleaseEvent(event);
}

void ImGuiPanel::focusOutEvent(QFocusEvent* event) {
  if (context_) {
    // Keys released while another widget had focus must not stay down.
    make_imgui_current();
    ImGuiIO& io = ImGui::GetIO();
    std::fill(std::begin(io.KeysDown), std::end(io.KeysDown), false);
    io.KeyCtrl = io.KeyShift = io.KeyAlt = io.KeySuper = false;
    request_frames();
  }
  QOpenGLWidget::focusOutEvent(event);
}

void ImGuiPanel::leaveEvent(QEvent* event) {
  if (context_) {
    make_imgui_current();
    ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    request_frames();
  }
  QOpenGLWidget::leaveEvent(event);
}

}  // namespace nautilus::views
