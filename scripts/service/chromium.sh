# Debian's chromium, for the real-browser check of report.html (common::testing::check_page):
# installed like the servers, never started as one (each check runs its own headless
# chromium and waits for it). Exports FAIRBENCH_CHROMIUM.

install_chromium() {
  ensure_packages chromium
}

start_chromium() {
  [ -x /usr/bin/chromium ] || die "chromium is not installed (scripts/install-servers chromium)"
  log "chromium $(/usr/bin/chromium --version 2>/dev/null | sed -n 's/^Chromium //p' | cut -d' ' -f1) for the HTML report checks (nothing started)"
  echo "export FAIRBENCH_CHROMIUM=/usr/bin/chromium"
}

stop_chromium() {
  :
}
