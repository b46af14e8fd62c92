//go:build !linux

package claimcache

func adviseHugePages([]slot) {}
