package voice

import "errors"

// rtcTransport is the WebRTC side for browsers.
type rtcTransport struct{}

func newRTCTransport(*Server, WebRTCConfig) (*rtcTransport, error) {
	return nil, errors.New("voice: webrtc not built yet")
}

func (t *rtcTransport) answer(*session, string) (string, error) {
	return "", errors.New("voice: webrtc not built yet")
}

func (t *rtcTransport) close() {}
