// The error codes the dashboard branches on, spelt as the API answers
// them (docs/errors.md). A test of package errcode holds each name here to
// its table, and keeps the other modules from spelling codes themselves.

export const ADMIN_UNAUTHORIZED = 'ADMIN_UNAUTHORIZED';
export const GATEWAY_OFFLINE = 'GATEWAY_OFFLINE';
export const REAUTH_REQUIRED = 'REAUTH_REQUIRED';
export const VALIDATION_ERROR = 'VALIDATION_ERROR';
