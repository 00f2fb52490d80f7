//go:build !linux || race

package gateway

import "syscall"

// nbRead and nbWrite are read(2) and write(2) on a non-blocking socket,
// through the syscall package (see sys_linux_norace.go for the raw ones).
func nbRead(fd int, b []byte) (int, error)  { return syscall.Read(fd, b) }
func nbWrite(fd int, b []byte) (int, error) { return syscall.Write(fd, b) }
