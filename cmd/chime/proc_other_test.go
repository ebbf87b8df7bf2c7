//go:build !linux

package main

import "syscall"

// childProcAttr: without Pdeathsig a chime child can outlive a test binary
// that panics; t.Cleanup still kills it on every ordinary exit.
func childProcAttr() *syscall.SysProcAttr { return nil }

// callbackSenders needs Linux's /proc: the sender of a fire stays unknown.
func callbackSenders(int) map[int]string { return nil }
