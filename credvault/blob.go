package credvault

// kindBlob names values sealed with MasterKey.Seal in the additional data.
const kindBlob = "sealed-blob"

// Seal encrypts plaintext under k with the vault's sealing (AES-256-GCM,
// a fresh random nonce, the format of stored secrets) for use outside the
// store, such as a key file kept beside it. purpose is bound into the
// additional data: the result opens only with Open and the same purpose.
func (k MasterKey) Seal(purpose string, plaintext []byte) ([]byte, error) {
	s, err := newSealer(k)
	if err != nil {
		return nil, err
	}
	return s.seal(kindBlob, purpose, 0, plaintext)
}

// Open decrypts a value sealed by Seal for purpose. A wrong key, another
// purpose and tampered bytes all fail alike.
func (k MasterKey) Open(purpose string, sealed []byte) ([]byte, error) {
	s, err := newSealer(k)
	if err != nil {
		return nil, err
	}
	return s.open(kindBlob, purpose, 0, sealed)
}
