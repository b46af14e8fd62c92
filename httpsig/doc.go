// Package httpsig implements HTTP Message Signatures (RFC 9421) and the
// Content-Digest field (RFC 9530).
package httpsig
