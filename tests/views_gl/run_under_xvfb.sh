#!/bin/sh
# Runs a test command on a private X server (Xvfb, 24-bit 1280x800) so that the OpenGL panels
# get a real GLX context (Mesa llvmpipe). Without xvfb-run the command runs as is and the GL
# tests skip.
if command -v xvfb-run >/dev/null 2>&1; then
  exec xvfb-run -a -s "-screen 0 1280x800x24" "$@"
fi
exec "$@"
