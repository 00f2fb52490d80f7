// Package transportpb holds the Go code generated from
// proto/concord/transport/v1 by hack/proto.sh. Do not edit the .pb.go
// files; edit the .proto sources and regenerate.
package transportpb
