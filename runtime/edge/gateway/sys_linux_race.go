//go:build linux && race

package gateway

import "syscall"

// epollWaitNow is epoll_wait with a zero timeout.
func epollWaitNow(epfd int, events []syscall.EpollEvent) (int, error) {
	return syscall.EpollWait(epfd, events, 0)
}
