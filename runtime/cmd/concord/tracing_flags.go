package main

import (
	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/config"
)

// bindTracingFlags registers the OpenTelemetry flags; sample is the
// command's default share (0 for `concord dev`: off unless asked).
func bindTracingFlags(fs *pflag.FlagSet, cfg *config.Config, sample float64) {
	strFlag(fs, &cfg.Tracing.Endpoint, "trace-endpoint", "",
		"OTLP/gRPC collector (host:port, plaintext) the process's OpenTelemetry spans go to; empty turns tracing off")
	floatFlag(fs, &cfg.Tracing.Sample, "trace-sample", sample,
		"share of new traces recorded (0 to 1; requests carrying a sampled W3C traceparent are recorded whatever it is); 0 turns tracing off")
}
