//go:build !linux

package claimcache

func adviseHugePages[T any]([]T) {}
