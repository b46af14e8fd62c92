package controlplane

// DefaultMaxInflightBodyBytes is the zero Config's cap on the request body
// bytes held at once across all requests in flight.
const DefaultMaxInflightBodyBytes = 64 << 20
