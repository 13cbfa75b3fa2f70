//go:build !linux

package emulator

import "syscall"

func platformSupported() error { return ErrUnsupportedPlatform }

func kill(int, syscall.Signal) error { return ErrUnsupportedPlatform }

func sysProcAttr() *syscall.SysProcAttr { return nil }

func commandSysProcAttr() *syscall.SysProcAttr { return nil }

func alive(int) bool { return false }

func groupAlive(int) bool { return false }
