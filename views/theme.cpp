#include "views/theme.h"

#include <QApplication>
#include <QColor>
#include <QStyleFactory>

namespace nautilus::views {

QPalette theme_palette(Theme theme) {
  QPalette palette;
  if (theme == Theme::Light) {
    palette.setColor(QPalette::Window, QColor(0xf3, 0xf4, 0xf6));
    palette.setColor(QPalette::WindowText, QColor(0x1f, 0x23, 0x28));
    palette.setColor(QPalette::Base, QColor(0xff, 0xff, 0xff));
    palette.setColor(QPalette::AlternateBase, QColor(0xf1, 0xf5, 0xfb));
    palette.setColor(QPalette::Text, QColor(0x1f, 0x23, 0x28));
    palette.setColor(QPalette::Button, QColor(0xe9, 0xeb, 0xef));
    palette.setColor(QPalette::ButtonText, QColor(0x1f, 0x23, 0x28));
    palette.setColor(QPalette::Highlight, QColor(0x1f, 0x6f, 0xeb));
    palette.setColor(QPalette::HighlightedText, QColor(0xff, 0xff, 0xff));
    palette.setColor(QPalette::ToolTipBase, QColor(0xff, 0xfb, 0xe6));
    palette.setColor(QPalette::ToolTipText, QColor(0x1f, 0x23, 0x28));
    palette.setColor(QPalette::PlaceholderText, QColor(0x80, 0x86, 0x8e));
    palette.setColor(QPalette::Link, QColor(0x09, 0x69, 0xda));
    return palette;
  }
  palette.setColor(QPalette::Window, QColor(0x23, 0x27, 0x2e));
  palette.setColor(QPalette::WindowText, QColor(0xdc, 0xdf, 0xe4));
  palette.setColor(QPalette::Base, QColor(0x1b, 0x1e, 0x24));
  palette.setColor(QPalette::AlternateBase, QColor(0x2a, 0x2f, 0x38));
  palette.setColor(QPalette::Text, QColor(0xdc, 0xdf, 0xe4));
  palette.setColor(QPalette::Button, QColor(0x2f, 0x34, 0x3d));
  palette.setColor(QPalette::ButtonText, QColor(0xdc, 0xdf, 0xe4));
  palette.setColor(QPalette::Highlight, QColor(0x3d, 0x7e, 0xe8));
  palette.setColor(QPalette::HighlightedText, QColor(0xff, 0xff, 0xff));
  palette.setColor(QPalette::ToolTipBase, QColor(0x2f, 0x34, 0x3d));
  palette.setColor(QPalette::ToolTipText, QColor(0xdc, 0xdf, 0xe4));
  palette.setColor(QPalette::PlaceholderText, QColor(0x8b, 0x92, 0x9c));
  palette.setColor(QPalette::Link, QColor(0x58, 0xa6, 0xff));
  palette.setColor(QPalette::Disabled, QPalette::Text, QColor(0x6b, 0x72, 0x7c));
  palette.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x6b, 0x72, 0x7c));
  palette.setColor(QPalette::Disabled, QPalette::WindowText, QColor(0x6b, 0x72, 0x7c));
  return palette;
}

void apply_theme(Theme theme) {
  if (QStyle* fusion = QStyleFactory::create(QStringLiteral("Fusion"))) {
    QApplication::setStyle(fusion);
  }
  QApplication::setPalette(theme_palette(theme));
}

QString theme_name(Theme theme) {
  return theme == Theme::Dark ? QStringLiteral("dark") : QStringLiteral("light");
}

Theme parse_theme(const QString& name) {
  return name == QStringLiteral("dark") ? Theme::Dark : Theme::Light;
}

}  // namespace nautilus::views
