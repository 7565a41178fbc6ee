// The light and the dark theme of Nautilus Studio: a Fusion style with a palette of each.
// Views read colours from QApplication::palette() when they paint, so a theme switch repaints
// everything; code highlighters rebuild their formats (CodeHighlighter::refresh_colors).
#pragma once

#include <QPalette>
#include <QString>

namespace nautilus::views {

enum class Theme { Light, Dark };

QPalette theme_palette(Theme theme);
// Sets the Fusion style and the theme's palette on the application.
void apply_theme(Theme theme);
QString theme_name(Theme theme);           // "light", "dark"
Theme parse_theme(const QString& name);    // anything but "dark" is light

}  // namespace nautilus::views
