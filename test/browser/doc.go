// Package browser tests Concord's web client in real Chromium: a `concord
// dev` process serves the app, and headless Chromium (Debian's chromium,
// found through CONCORD_CHROMIUM, which hack/test-deps.sh exports) is
// driven over the DevTools protocol by chromedp. The tests find elements by
// their accessible role and name, as a screen reader would, so the names
// the issue fixes ("Message #general", "Channels", ...) are checked too.
//
// The tests carry the integration build tag and fail, never skip, when
// Chromium is missing. Screenshots of each screen are written to
// docs/screenshots when CONCORD_SCREENSHOTS=1.
package browser
