package liverole

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/classifier/kserve"
	"github.com/concord-chat/concord/runtime/domain/live/classifier/linear"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// classifierFor returns the classifier --live-classifier names: the Go
// model shipped in the binary ("linear"), none ("off"), or a KServe v2 /
// Triton server given as http(s)://host:port/MODEL.
func classifierFor(spec string) (live.Classifier, error) {
	switch spec {
	case "", "linear":
		m, err := linear.Default()
		if err != nil {
			return nil, fmt.Errorf("live-moderation: the Go model: %w", err)
		}
		return m, nil
	case "off":
		return nil, nil
	}
	u, err := url.Parse(spec)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || strings.Trim(u.Path, "/") == "" {
		return nil, fmt.Errorf("--live-classifier=%q: want linear, off or http://host:port/MODEL (a KServe v2 server)", spec)
	}
	model := strings.Trim(u.Path, "/")
	c, err := kserve.New(kserve.Config{URL: u.Scheme + "://" + u.Host, Model: model})
	if err != nil {
		return nil, fmt.Errorf("live-moderation: %w", err)
	}
	return c, nil
}

// buildModeration builds the ML moderation consumer: its own consumer
// group on the comments topic, retracting through the event log and
// banning repeat offenders on the board.
func buildModeration(ctx context.Context, b *wiring.Builder) error {
	bk, err := backendsOf(b)
	if err != nil {
		return err
	}
	cl, err := classifierFor(b.Config.Live.Classifier)
	if err != nil {
		return err
	}
	if cl == nil {
		b.Logger.Info("live-moderation: --live-classifier=off; comments are not scored")
		return nil
	}
	p := b.Config.Live.Prefix
	mod, err := moderation.New(moderation.Config{Topics: topics(b), Group: p + "moderation", Logger: b.Logger, Registerer: b.Metrics},
		moderation.Deps{Log: bk.Log, Append: bk.Log, Classifier: cl, Board: bk.Board})
	if err != nil {
		return fmt.Errorf("live moderation: %w", err)
	}
	return b.Add(lifecycle.Part{Name: "moderation", Run: mod.Run})
}
