// Command pause is the sandbox process of the local node's pods
// (hack/node): it holds a pod's namespaces open and does nothing until it
// is told to stop. containerd's sandbox_image is a scratch image holding
// only this binary, built from source because the node pulls nothing.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
