// ImGuiPanel: a QOpenGLWidget hosting one Dear ImGui context, the base of the dense pictures
// of Nautilus Studio (layout grids, pipeline timelines).
//
// Dear ImGui 1.86 from Debian has no Qt backend, so this class is one (STACK.md):
//   * initializeGL creates the widget's own ImGui context (no imgui.ini is written) and the
//     OpenGL3 renderer; paintGL runs NewFrame, one borderless window filling the widget in which
//     the subclass's draw() emits its widgets, Render and the OpenGL3 draw. The context is made
//     current in every entry point, since several panels (several contexts) live side by side.
//   * Qt mouse, wheel, key and text events fill ImGui's pre-1.87 IO fields (MousePos,
//     MouseDown[], MouseWheel, KeysDown[] with KeyMap[], AddInputCharactersUTF8).
//   * Frames are drawn on demand only: an input event or a data change asks for a couple of
//     frames (ImGui needs one frame to react to input and one to show the result); nothing runs
//     while the user does nothing -- a free-running 16 ms timer costs ~60% of a core under
//     llvmpipe.
//   * HiDPI: DisplaySize is in logical pixels, DisplayFramebufferScale is the device pixel
//     ratio, and the font atlas is rasterized at that ratio so text stays sharp.
//   * The GL context is recreated when the widget is reparented (a dock floated or docked):
//     the renderer is shut down with the old context and set up again in the next
//     initializeGL, while the ImGui context (window state, scroll positions) survives.
//   * The ImGui style follows the application palette (light or dark theme).
//
// A shown QOpenGLWidget crashes on Qt's offscreen platform (Qt 6.4): create panels only where
// gl_panels_supported() says so, and a placeholder elsewhere.
#pragma once

#include <QOpenGLWidget>

#include <cstdint>

struct ImGuiContext;

namespace nautilus::views {

// True on platforms that can show OpenGL widgets (xcb, wayland, windows, cocoa), false on
// offscreen / minimal (tests of plain widgets, screenshots without a display).
bool gl_panels_supported();

class ImGuiPanel : public QOpenGLWidget {
  Q_OBJECT

 public:
  explicit ImGuiPanel(QWidget* parent = nullptr);
  ~ImGuiPanel() override;

  // Asks for `frames` more frames (data changed, or ImGui needs to settle).
  void request_frames(int frames = 2);
  // Frames drawn so far (tests check that an idle panel draws none).
  int64_t frames_drawn() const { return frames_drawn_; }

  QSize sizeHint() const override { return QSize(640, 420); }

 protected:
  // Emits the panel's widgets; the current window fills the widget. Called inside paintGL with
  // this panel's ImGui context current.
  virtual void draw() = 0;

  void initializeGL() override;
  void resizeGL(int width, int height) override;
  void paintGL() override;

  void mouseMoveEvent(QMouseEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void keyReleaseEvent(QKeyEvent* event) override;
  void focusOutEvent(QFocusEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  void make_imgui_current() const;
  void shutdown_renderer();
  void context_about_to_go();  // QOpenGLContext::aboutToBeDestroyed
  void update_fonts(double device_pixel_ratio);
  void update_style();
  void mouse_button(QMouseEvent* event, bool down);
  bool key(QKeyEvent* event, bool down);

  ImGuiContext* context_ = nullptr;
  bool renderer_ready_ = false;
  double font_ratio_ = 0.0;  // device pixel ratio the font atlas was built for
  bool dark_style_ = false;
  bool style_set_ = false;
  int frames_wanted_ = 0;
  int64_t frames_drawn_ = 0;
  int64_t last_frame_ns_ = 0;
};

}  // namespace nautilus::views
