// Code generated via abigen V2 - DO NOT EDIT.
// This file is a generated binding and any manual changes will be lost.

package idnregistry

import (
	"bytes"
	"errors"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Reference imports to suppress errors if they are not otherwise used.
var (
	_ = bytes.Equal
	_ = errors.New
	_ = big.NewInt
	_ = common.Big1
	_ = types.BloomLookup
	_ = abi.ConvertType
)

// IDNRegistryMetaData contains all meta data concerning the IDNRegistry contract.
var IDNRegistryMetaData = bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"address\",\"name\":\"relayer_\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"ClaimNotFound\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"EmptyArgument\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"},{\"internalType\":\"enumIDNRegistry.ClaimStatus\",\"name\":\"status\",\"type\":\"uint8\"}],\"name\":\"InvalidClaimState\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"name\",\"type\":\"string\"}],\"name\":\"NamespaceNotRegistered\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"}],\"name\":\"NotOwner\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"}],\"name\":\"NotRelayer\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"ZeroAddress\",\"type\":\"error\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"tupleKey\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"ClaimApproved\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"tupleKey\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"ClaimApprovedDirect\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"tupleKey\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"ClaimRejected\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"tupleKey\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"ClaimRevoked\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"tupleKey\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"ClaimRevokedDirect\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"tupleKey\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"ClaimSubmitted\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"nameHash\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"name\",\"type\":\"string\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"owner\",\"type\":\"address\"}],\"name\":\"NamespaceRegistered\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"nameHash\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"name\",\"type\":\"string\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"previousOwner\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"newOwner\",\"type\":\"address\"}],\"name\":\"NamespaceTransferred\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"previousOwner\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"newOwner\",\"type\":\"address\"}],\"name\":\"OwnershipTransferred\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"previousRelayer\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"newRelayer\",\"type\":\"address\"}],\"name\":\"RelayerChanged\",\"type\":\"event\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"approveClaim\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"approveClaimDirect\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"authorization\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"authorized\",\"type\":\"bool\"},{\"internalType\":\"uint64\",\"name\":\"changedAt\",\"type\":\"uint64\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"claimCount\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"claimOf\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"key\",\"type\":\"bytes32\"},{\"internalType\":\"enumIDNRegistry.ClaimStatus\",\"name\":\"status\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"isAuthorized\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"name\",\"type\":\"string\"}],\"name\":\"namespaceOf\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"nsOwner\",\"type\":\"address\"},{\"internalType\":\"uint64\",\"name\":\"registeredAt\",\"type\":\"uint64\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"owner\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"name\",\"type\":\"string\"}],\"name\":\"registerNamespace\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"rejectClaim\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"relayer\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"name\":\"revokeClaim\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"revokeClaimDirect\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"newRelayer\",\"type\":\"address\"}],\"name\":\"setRelayer\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"submitClaim\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"claimId\",\"type\":\"uint256\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"name\",\"type\":\"string\"},{\"internalType\":\"address\",\"name\":\"newOwner\",\"type\":\"address\"}],\"name\":\"transferNamespace\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"newOwner\",\"type\":\"address\"}],\"name\":\"transferOwnership\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"string\",\"name\":\"namespace\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"publicKey\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"service\",\"type\":\"string\"}],\"name\":\"tupleKey\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"pure\",\"type\":\"function\"}]",
	ID:  "IDNRegistry",
	Bin: "0x608060405234801561000f575f5ffd5b506040516111a23803806111a283398101604081905261002e916100ce565b6001600160a01b03811661003f5750335b5f8054336001600160a01b031991821681178355600180549092166001600160a01b038516179091556040519091907f8be0079c531659141344cd1fd0a4f28419497f9722a3daafe3b4186f6b6457e0908290a36040516001600160a01b038216905f907f18f08848c5694a025f9966c34ff2367f32a1a8275663b282ee01f4338b045490908290a3506100fb565b5f602082840312156100de575f5ffd5b81516001600160a01b03811681146100f4575f5ffd5b9392505050565b61109a806101085f395ff3fe608060405234801561000f575f5ffd5b5060043610610111575f3560e01c80636548e9bc1161009e578063b26879301161006e578063b268793014610292578063c21d89dd146102a5578063ea844cf3146102b8578063f2fde38b146102eb578063fc398631146102fe575f5ffd5b80636548e9bc146102395780638406c0791461024c5780638da4d3c9146102775780638da5cb5b14610280575f5ffd5b806332196ddc116100e457806332196ddc146101a257806346e30135146101b5578063479c776f146101c857806360179522146102035780636367e37014610216575f5ffd5b806311c8dc5a146101155780631dcd8b2314610159578063203411011461016e5780632d6c9f3414610181575b5f5ffd5b610142610123366004610da7565b5f9081526005602052604090208054600190910154909160ff90911690565b604051610150929190610df2565b60405180910390f35b61016c610167366004610e44565b610311565b005b61016c61017c366004610da7565b6103c8565b61019461018f366004610e44565b610469565b604051908152602001610150565b61016c6101b0366004610e44565b610560565b61016c6101c3366004610da7565b6105fe565b6101db6101d6366004610ee3565b6106ab565b604080516001600160a01b03909316835267ffffffffffffffff909116602083015201610150565b61016c610211366004610ee3565b610702565b610229610224366004610e44565b61082c565b6040519015158152602001610150565b61016c610247366004610f3d565b61085c565b60015461025f906001600160a01b031681565b6040516001600160a01b039091168152602001610150565b61019460025481565b5f5461025f906001600160a01b031681565b61016c6102a0366004610f56565b61090a565b61016c6102b3366004610da7565b610a3f565b6102cb6102c6366004610e44565b610aec565b60408051921515835267ffffffffffffffff909116602083015201610150565b61016c6102f9366004610f3d565b610b32565b61019461030c366004610e44565b610bde565b6001546001600160a01b0316331461034357604051631b35972d60e11b81523360048201526024015b60405180910390fd5b5f610352878787878787610c1c565b5f8181526004602052604090205490915060ff161561037157506103c0565b61037c816001610c68565b807f4d4496bb399c5483b46f807d845dc9b030437084795dedd6bbe498e740aa04c48888888888886040516103b696959493929190610fce565b60405180910390a2505b505050505050565b6001546001600160a01b031633146103f557604051631b35972d60e11b815233600482015260240161033a565b5f6104038260016003610ccb565b90506003600182015460ff16600481111561042057610420610dbe565b03610429575050565b60018101805460ff1916600317905580546040518391907f8f5769f8609a025a2002ab0cc696873ee3cccdce047282af244c00c1687301a3905f90a35050565b6001545f906001600160a01b0316331461049857604051631b35972d60e11b815233600482015260240161033a565b5f6104a7888888888888610c1c565b905060025f81546104b790611016565b9182905550604080518082018252838152600160208083018281525f86815260059092529390208251815592518382018054959750929490929160ff199091169083600481111561050a5761050a610dbe565b021790555090505081817f3061c8ea309fd966986c27f4342912c9805e7921fd19df976f2a3a9e3094fdba8a8a8a8a8a8a60405161054d96959493929190610fce565b60405180910390a3509695505050505050565b6001546001600160a01b0316331461058d57604051631b35972d60e11b815233600482015260240161033a565b5f61059c878787878787610c1c565b5f8181526004602052604090205490915060ff166105ba57506103c0565b6105c4815f610c68565b807f6798af9ca645dac39b3633e4aca9dcb9b17eb14118703630e9f4d95e1c119f068888888888886040516103b696959493929190610fce565b6001546001600160a01b0316331461062b57604051631b35972d60e11b815233600482015260240161033a565b5f6106398260016002610ccb565b90506002600182015460ff16600481111561065657610656610dbe565b0361065f575050565b6001818101805460ff19166002179055815461067a91610c68565b80546040518391907f18ecd6d8c2fbfbfadaa27444d213869784ae2265484a2d9e31f15a909096e03e905f90a35050565b5f5f5f60035f86866040516106c192919061103a565b604080519182900390912082526020820192909252015f20546001600160a01b0381169350600160a01b900467ffffffffffffffff169150505b9250929050565b6001546001600160a01b0316331461072f57604051631b35972d60e11b815233600482015260240161033a565b5f81900361075057604051632e64610f60e11b815260040160405180910390fd5b5f828260405161076192919061103a565b60408051918290039091205f818152600360205291909120549091506001600160a01b03161561079057505050565b6040805180820182523380825267ffffffffffffffff43811660208085019182525f8781526003909152859020935184549151909216600160a01b026001600160e01b03199091166001600160a01b03929092169190911717909155905182907fbba069e7db98ccadc1bb46fbc4cb825fba145888cd7ca81859fcf4d8cb7ca6c09061081f9087908790611049565b60405180910390a3505050565b5f60045f61083e898989898989610bde565b815260208101919091526040015f205460ff16979650505050505050565b5f546001600160a01b031633146108885760405163245aecd360e01b815233600482015260240161033a565b6001600160a01b0381166108af5760405163d92e233d60e01b815260040160405180910390fd5b6001546040516001600160a01b038084169216907f18f08848c5694a025f9966c34ff2367f32a1a8275663b282ee01f4338b045490905f90a3600180546001600160a01b0319166001600160a01b0392909216919091179055565b6001546001600160a01b0316331461093757604051631b35972d60e11b815233600482015260240161033a565b6001600160a01b03811661095e5760405163d92e233d60e01b815260040160405180910390fd5b5f838360405161096f92919061103a565b60408051918290039091205f8181526003602052919091208054919250906001600160a01b03166109b75784846040516304ce188b60e31b815260040161033a929190611049565b80546001600160a01b038085169116036109d2575050505050565b80546040516001600160a01b0380861692169084907fdb1dd7ce65e2116973cf1ff10e9cf161688be5e17f3f56b760ce43c4cc02d00090610a16908a908a90611049565b60405180910390a480546001600160a01b0384166001600160a01b031990911617905550505050565b6001546001600160a01b03163314610a6c57604051631b35972d60e11b815233600482015260240161033a565b5f610a7a8260026004610ccb565b90506004600182015460ff166004811115610a9757610a97610dbe565b03610aa0575050565b60018101805460ff191660041790558054610abb905f610c68565b80546040518391907fb083822da40b244ccb3918308e640276f59fca9807076d18038d4739adce925f905f90a35050565b5f5f5f60045f610b008b8b8b8b8b8b610bde565b815260208101919091526040015f205460ff81169a61010090910467ffffffffffffffff169950975050505050505050565b5f546001600160a01b03163314610b5e5760405163245aecd360e01b815233600482015260240161033a565b6001600160a01b038116610b855760405163d92e233d60e01b815260040160405180910390fd5b5f80546040516001600160a01b03808516939216917f8be0079c531659141344cd1fd0a4f28419497f9722a3daafe3b4186f6b6457e091a35f80546001600160a01b0319166001600160a01b0392909216919091179055565b5f868686868686604051602001610bfa96959493929190610fce565b6040516020818303038152906040528051906020012090509695505050505050565b5f851580610c28575083155b80610c31575081155b15610c4f57604051632e64610f60e11b815260040160405180910390fd5b610c5d878787878787610bde565b979650505050505050565b60408051808201825291151582524367ffffffffffffffff90811660208085019182525f958652600490529190932091518254915168ffffffffffffffffff1990921690151568ffffffffffffffff001916176101009190931602919091179055565b5f83815260056020526040812090600182015460ff166004811115610cf257610cf2610dbe565b03610d1357604051633373e46160e01b81526004810185905260240161033a565b826004811115610d2557610d25610dbe565b600182015460ff166004811115610d3e57610d3e610dbe565b14158015610d755750816004811115610d5957610d59610dbe565b600182015460ff166004811115610d7257610d72610dbe565b14155b15610da057600181015460405163432a4d5160e01b815261033a91869160ff90911690600401610df2565b9392505050565b5f60208284031215610db7575f5ffd5b5035919050565b634e487b7160e01b5f52602160045260245ffd5b60058110610dee57634e487b7160e01b5f52602160045260245ffd5b9052565b82815260408101610da06020830184610dd2565b5f5f83601f840112610e16575f5ffd5b50813567ffffffffffffffff811115610e2d575f5ffd5b6020830191508360208285010111156106fb575f5ffd5b5f5f5f5f5f5f60608789031215610e59575f5ffd5b863567ffffffffffffffff811115610e6f575f5ffd5b610e7b89828a01610e06565b909750955050602087013567ffffffffffffffff811115610e9a575f5ffd5b610ea689828a01610e06565b909550935050604087013567ffffffffffffffff811115610ec5575f5ffd5b610ed189828a01610e06565b979a9699509497509295939492505050565b5f5f60208385031215610ef4575f5ffd5b823567ffffffffffffffff811115610f0a575f5ffd5b610f1685828601610e06565b90969095509350505050565b80356001600160a01b0381168114610f38575f5ffd5b919050565b5f60208284031215610f4d575f5ffd5b610da082610f22565b5f5f5f60408486031215610f68575f5ffd5b833567ffffffffffffffff811115610f7e575f5ffd5b610f8a86828701610e06565b9094509250610f9d905060208501610f22565b90509250925092565b81835281816020850137505f828201602090810191909152601f909101601f19169091010190565b606081525f610fe160608301888a610fa6565b8281036020840152610ff4818789610fa6565b90508281036040840152611009818587610fa6565b9998505050505050505050565b5f6001820161103357634e487b7160e01b5f52601160045260245ffd5b5060010190565b818382375f9101908152919050565b602081525f61105c602083018486610fa6565b94935050505056fea264697066735822122051f09a9a9e414d27c9bc208f91e04635bb540b36b65aa3a1ae04f15bf632f2c364736f6c63430008250033",
}

// IDNRegistry is an auto generated Go binding around an Ethereum contract.
type IDNRegistry struct {
	abi abi.ABI
}

// GetABI returns the ABI associated with this contract binding.
func (c *IDNRegistry) GetABI() abi.ABI {
	return c.abi
}

// NewIDNRegistry creates a new instance of IDNRegistry.
func NewIDNRegistry() *IDNRegistry {
	parsed, err := IDNRegistryMetaData.ParseABI()
	if err != nil {
		panic(errors.New("invalid ABI: " + err.Error()))
	}
	return &IDNRegistry{abi: *parsed}
}

// Instance creates a wrapper for a deployed contract instance at the given address.
// Use this to create the instance object passed to abigen v2 library functions Call, Transact, etc.
func (c *IDNRegistry) Instance(backend bind.ContractBackend, addr common.Address) *bind.BoundContract {
	return bind.NewBoundContract(addr, c.abi, backend, backend, backend)
}

// PackConstructor is the Go binding used to pack the parameters required for
// contract deployment.
//
// Solidity: constructor(address relayer_) returns()
func (iDNRegistry *IDNRegistry) PackConstructor(relayer_ common.Address) []byte {
	enc, err := iDNRegistry.abi.Pack("", relayer_)
	if err != nil {
		panic(err)
	}
	return enc
}

// PackApproveClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x46e30135.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function approveClaim(uint256 claimId) returns()
func (iDNRegistry *IDNRegistry) PackApproveClaim(claimId *big.Int) []byte {
	enc, err := iDNRegistry.abi.Pack("approveClaim", claimId)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackApproveClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x46e30135.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function approveClaim(uint256 claimId) returns()
func (iDNRegistry *IDNRegistry) TryPackApproveClaim(claimId *big.Int) ([]byte, error) {
	return iDNRegistry.abi.Pack("approveClaim", claimId)
}

// PackApproveClaimDirect is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x1dcd8b23.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function approveClaimDirect(string namespace, string publicKey, string service) returns()
func (iDNRegistry *IDNRegistry) PackApproveClaimDirect(namespace string, publicKey string, service string) []byte {
	enc, err := iDNRegistry.abi.Pack("approveClaimDirect", namespace, publicKey, service)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackApproveClaimDirect is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x1dcd8b23.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function approveClaimDirect(string namespace, string publicKey, string service) returns()
func (iDNRegistry *IDNRegistry) TryPackApproveClaimDirect(namespace string, publicKey string, service string) ([]byte, error) {
	return iDNRegistry.abi.Pack("approveClaimDirect", namespace, publicKey, service)
}

// PackAuthorization is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xea844cf3.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function authorization(string namespace, string publicKey, string service) view returns(bool authorized, uint64 changedAt)
func (iDNRegistry *IDNRegistry) PackAuthorization(namespace string, publicKey string, service string) []byte {
	enc, err := iDNRegistry.abi.Pack("authorization", namespace, publicKey, service)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackAuthorization is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xea844cf3.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function authorization(string namespace, string publicKey, string service) view returns(bool authorized, uint64 changedAt)
func (iDNRegistry *IDNRegistry) TryPackAuthorization(namespace string, publicKey string, service string) ([]byte, error) {
	return iDNRegistry.abi.Pack("authorization", namespace, publicKey, service)
}

// AuthorizationOutput serves as a container for the return parameters of contract
// method Authorization.
type AuthorizationOutput struct {
	Authorized bool
	ChangedAt  uint64
}

// UnpackAuthorization is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xea844cf3.
//
// Solidity: function authorization(string namespace, string publicKey, string service) view returns(bool authorized, uint64 changedAt)
func (iDNRegistry *IDNRegistry) UnpackAuthorization(data []byte) (AuthorizationOutput, error) {
	out, err := iDNRegistry.abi.Unpack("authorization", data)
	outstruct := new(AuthorizationOutput)
	if err != nil {
		return *outstruct, err
	}
	outstruct.Authorized = *abi.ConvertType(out[0], new(bool)).(*bool)
	outstruct.ChangedAt = *abi.ConvertType(out[1], new(uint64)).(*uint64)
	return *outstruct, nil
}

// PackClaimCount is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da4d3c9.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function claimCount() view returns(uint256)
func (iDNRegistry *IDNRegistry) PackClaimCount() []byte {
	enc, err := iDNRegistry.abi.Pack("claimCount")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackClaimCount is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da4d3c9.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function claimCount() view returns(uint256)
func (iDNRegistry *IDNRegistry) TryPackClaimCount() ([]byte, error) {
	return iDNRegistry.abi.Pack("claimCount")
}

// UnpackClaimCount is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x8da4d3c9.
//
// Solidity: function claimCount() view returns(uint256)
func (iDNRegistry *IDNRegistry) UnpackClaimCount(data []byte) (*big.Int, error) {
	out, err := iDNRegistry.abi.Unpack("claimCount", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackClaimOf is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x11c8dc5a.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function claimOf(uint256 claimId) view returns(bytes32 key, uint8 status)
func (iDNRegistry *IDNRegistry) PackClaimOf(claimId *big.Int) []byte {
	enc, err := iDNRegistry.abi.Pack("claimOf", claimId)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackClaimOf is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x11c8dc5a.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function claimOf(uint256 claimId) view returns(bytes32 key, uint8 status)
func (iDNRegistry *IDNRegistry) TryPackClaimOf(claimId *big.Int) ([]byte, error) {
	return iDNRegistry.abi.Pack("claimOf", claimId)
}

// ClaimOfOutput serves as a container for the return parameters of contract
// method ClaimOf.
type ClaimOfOutput struct {
	Key    [32]byte
	Status uint8
}

// UnpackClaimOf is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x11c8dc5a.
//
// Solidity: function claimOf(uint256 claimId) view returns(bytes32 key, uint8 status)
func (iDNRegistry *IDNRegistry) UnpackClaimOf(data []byte) (ClaimOfOutput, error) {
	out, err := iDNRegistry.abi.Unpack("claimOf", data)
	outstruct := new(ClaimOfOutput)
	if err != nil {
		return *outstruct, err
	}
	outstruct.Key = *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	outstruct.Status = *abi.ConvertType(out[1], new(uint8)).(*uint8)
	return *outstruct, nil
}

// PackIsAuthorized is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x6367e370.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function isAuthorized(string namespace, string publicKey, string service) view returns(bool)
func (iDNRegistry *IDNRegistry) PackIsAuthorized(namespace string, publicKey string, service string) []byte {
	enc, err := iDNRegistry.abi.Pack("isAuthorized", namespace, publicKey, service)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackIsAuthorized is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x6367e370.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function isAuthorized(string namespace, string publicKey, string service) view returns(bool)
func (iDNRegistry *IDNRegistry) TryPackIsAuthorized(namespace string, publicKey string, service string) ([]byte, error) {
	return iDNRegistry.abi.Pack("isAuthorized", namespace, publicKey, service)
}

// UnpackIsAuthorized is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x6367e370.
//
// Solidity: function isAuthorized(string namespace, string publicKey, string service) view returns(bool)
func (iDNRegistry *IDNRegistry) UnpackIsAuthorized(data []byte) (bool, error) {
	out, err := iDNRegistry.abi.Unpack("isAuthorized", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackNamespaceOf is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x479c776f.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function namespaceOf(string name) view returns(address nsOwner, uint64 registeredAt)
func (iDNRegistry *IDNRegistry) PackNamespaceOf(name string) []byte {
	enc, err := iDNRegistry.abi.Pack("namespaceOf", name)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackNamespaceOf is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x479c776f.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function namespaceOf(string name) view returns(address nsOwner, uint64 registeredAt)
func (iDNRegistry *IDNRegistry) TryPackNamespaceOf(name string) ([]byte, error) {
	return iDNRegistry.abi.Pack("namespaceOf", name)
}

// NamespaceOfOutput serves as a container for the return parameters of contract
// method NamespaceOf.
type NamespaceOfOutput struct {
	NsOwner      common.Address
	RegisteredAt uint64
}

// UnpackNamespaceOf is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x479c776f.
//
// Solidity: function namespaceOf(string name) view returns(address nsOwner, uint64 registeredAt)
func (iDNRegistry *IDNRegistry) UnpackNamespaceOf(data []byte) (NamespaceOfOutput, error) {
	out, err := iDNRegistry.abi.Unpack("namespaceOf", data)
	outstruct := new(NamespaceOfOutput)
	if err != nil {
		return *outstruct, err
	}
	outstruct.NsOwner = *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	outstruct.RegisteredAt = *abi.ConvertType(out[1], new(uint64)).(*uint64)
	return *outstruct, nil
}

// PackOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da5cb5b.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function owner() view returns(address)
func (iDNRegistry *IDNRegistry) PackOwner() []byte {
	enc, err := iDNRegistry.abi.Pack("owner")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da5cb5b.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function owner() view returns(address)
func (iDNRegistry *IDNRegistry) TryPackOwner() ([]byte, error) {
	return iDNRegistry.abi.Pack("owner")
}

// UnpackOwner is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x8da5cb5b.
//
// Solidity: function owner() view returns(address)
func (iDNRegistry *IDNRegistry) UnpackOwner(data []byte) (common.Address, error) {
	out, err := iDNRegistry.abi.Unpack("owner", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackRegisterNamespace is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x60179522.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function registerNamespace(string name) returns()
func (iDNRegistry *IDNRegistry) PackRegisterNamespace(name string) []byte {
	enc, err := iDNRegistry.abi.Pack("registerNamespace", name)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackRegisterNamespace is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x60179522.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function registerNamespace(string name) returns()
func (iDNRegistry *IDNRegistry) TryPackRegisterNamespace(name string) ([]byte, error) {
	return iDNRegistry.abi.Pack("registerNamespace", name)
}

// PackRejectClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x20341101.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function rejectClaim(uint256 claimId) returns()
func (iDNRegistry *IDNRegistry) PackRejectClaim(claimId *big.Int) []byte {
	enc, err := iDNRegistry.abi.Pack("rejectClaim", claimId)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackRejectClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x20341101.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function rejectClaim(uint256 claimId) returns()
func (iDNRegistry *IDNRegistry) TryPackRejectClaim(claimId *big.Int) ([]byte, error) {
	return iDNRegistry.abi.Pack("rejectClaim", claimId)
}

// PackRelayer is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8406c079.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function relayer() view returns(address)
func (iDNRegistry *IDNRegistry) PackRelayer() []byte {
	enc, err := iDNRegistry.abi.Pack("relayer")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackRelayer is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8406c079.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function relayer() view returns(address)
func (iDNRegistry *IDNRegistry) TryPackRelayer() ([]byte, error) {
	return iDNRegistry.abi.Pack("relayer")
}

// UnpackRelayer is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x8406c079.
//
// Solidity: function relayer() view returns(address)
func (iDNRegistry *IDNRegistry) UnpackRelayer(data []byte) (common.Address, error) {
	out, err := iDNRegistry.abi.Unpack("relayer", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackRevokeClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc21d89dd.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function revokeClaim(uint256 claimId) returns()
func (iDNRegistry *IDNRegistry) PackRevokeClaim(claimId *big.Int) []byte {
	enc, err := iDNRegistry.abi.Pack("revokeClaim", claimId)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackRevokeClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xc21d89dd.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function revokeClaim(uint256 claimId) returns()
func (iDNRegistry *IDNRegistry) TryPackRevokeClaim(claimId *big.Int) ([]byte, error) {
	return iDNRegistry.abi.Pack("revokeClaim", claimId)
}

// PackRevokeClaimDirect is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x32196ddc.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function revokeClaimDirect(string namespace, string publicKey, string service) returns()
func (iDNRegistry *IDNRegistry) PackRevokeClaimDirect(namespace string, publicKey string, service string) []byte {
	enc, err := iDNRegistry.abi.Pack("revokeClaimDirect", namespace, publicKey, service)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackRevokeClaimDirect is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x32196ddc.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function revokeClaimDirect(string namespace, string publicKey, string service) returns()
func (iDNRegistry *IDNRegistry) TryPackRevokeClaimDirect(namespace string, publicKey string, service string) ([]byte, error) {
	return iDNRegistry.abi.Pack("revokeClaimDirect", namespace, publicKey, service)
}

// PackSetRelayer is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x6548e9bc.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function setRelayer(address newRelayer) returns()
func (iDNRegistry *IDNRegistry) PackSetRelayer(newRelayer common.Address) []byte {
	enc, err := iDNRegistry.abi.Pack("setRelayer", newRelayer)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSetRelayer is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x6548e9bc.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function setRelayer(address newRelayer) returns()
func (iDNRegistry *IDNRegistry) TryPackSetRelayer(newRelayer common.Address) ([]byte, error) {
	return iDNRegistry.abi.Pack("setRelayer", newRelayer)
}

// PackSubmitClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x2d6c9f34.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function submitClaim(string namespace, string publicKey, string service) returns(uint256 claimId)
func (iDNRegistry *IDNRegistry) PackSubmitClaim(namespace string, publicKey string, service string) []byte {
	enc, err := iDNRegistry.abi.Pack("submitClaim", namespace, publicKey, service)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSubmitClaim is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x2d6c9f34.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function submitClaim(string namespace, string publicKey, string service) returns(uint256 claimId)
func (iDNRegistry *IDNRegistry) TryPackSubmitClaim(namespace string, publicKey string, service string) ([]byte, error) {
	return iDNRegistry.abi.Pack("submitClaim", namespace, publicKey, service)
}

// UnpackSubmitClaim is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x2d6c9f34.
//
// Solidity: function submitClaim(string namespace, string publicKey, string service) returns(uint256 claimId)
func (iDNRegistry *IDNRegistry) UnpackSubmitClaim(data []byte) (*big.Int, error) {
	out, err := iDNRegistry.abi.Unpack("submitClaim", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackTransferNamespace is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xb2687930.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function transferNamespace(string name, address newOwner) returns()
func (iDNRegistry *IDNRegistry) PackTransferNamespace(name string, newOwner common.Address) []byte {
	enc, err := iDNRegistry.abi.Pack("transferNamespace", name, newOwner)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTransferNamespace is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xb2687930.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function transferNamespace(string name, address newOwner) returns()
func (iDNRegistry *IDNRegistry) TryPackTransferNamespace(name string, newOwner common.Address) ([]byte, error) {
	return iDNRegistry.abi.Pack("transferNamespace", name, newOwner)
}

// PackTransferOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xf2fde38b.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function transferOwnership(address newOwner) returns()
func (iDNRegistry *IDNRegistry) PackTransferOwnership(newOwner common.Address) []byte {
	enc, err := iDNRegistry.abi.Pack("transferOwnership", newOwner)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTransferOwnership is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xf2fde38b.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function transferOwnership(address newOwner) returns()
func (iDNRegistry *IDNRegistry) TryPackTransferOwnership(newOwner common.Address) ([]byte, error) {
	return iDNRegistry.abi.Pack("transferOwnership", newOwner)
}

// PackTupleKey is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfc398631.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function tupleKey(string namespace, string publicKey, string service) pure returns(bytes32)
func (iDNRegistry *IDNRegistry) PackTupleKey(namespace string, publicKey string, service string) []byte {
	enc, err := iDNRegistry.abi.Pack("tupleKey", namespace, publicKey, service)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackTupleKey is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfc398631.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function tupleKey(string namespace, string publicKey, string service) pure returns(bytes32)
func (iDNRegistry *IDNRegistry) TryPackTupleKey(namespace string, publicKey string, service string) ([]byte, error) {
	return iDNRegistry.abi.Pack("tupleKey", namespace, publicKey, service)
}

// UnpackTupleKey is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xfc398631.
//
// Solidity: function tupleKey(string namespace, string publicKey, string service) pure returns(bytes32)
func (iDNRegistry *IDNRegistry) UnpackTupleKey(data []byte) ([32]byte, error) {
	out, err := iDNRegistry.abi.Unpack("tupleKey", data)
	if err != nil {
		return *new([32]byte), err
	}
	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)
	return out0, nil
}

// IDNRegistryClaimApproved represents a ClaimApproved event raised by the IDNRegistry contract.
type IDNRegistryClaimApproved struct {
	TupleKey [32]byte
	ClaimId  *big.Int
	Raw      *types.Log // Blockchain specific contextual infos
}

const IDNRegistryClaimApprovedEventName = "ClaimApproved"

// ContractEventName returns the user-defined event name.
func (IDNRegistryClaimApproved) ContractEventName() string {
	return IDNRegistryClaimApprovedEventName
}

// UnpackClaimApprovedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ClaimApproved(bytes32 indexed tupleKey, uint256 indexed claimId)
func (iDNRegistry *IDNRegistry) UnpackClaimApprovedEvent(log *types.Log) (*IDNRegistryClaimApproved, error) {
	event := "ClaimApproved"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryClaimApproved)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryClaimApprovedDirect represents a ClaimApprovedDirect event raised by the IDNRegistry contract.
type IDNRegistryClaimApprovedDirect struct {
	TupleKey  [32]byte
	Namespace string
	PublicKey string
	Service   string
	Raw       *types.Log // Blockchain specific contextual infos
}

const IDNRegistryClaimApprovedDirectEventName = "ClaimApprovedDirect"

// ContractEventName returns the user-defined event name.
func (IDNRegistryClaimApprovedDirect) ContractEventName() string {
	return IDNRegistryClaimApprovedDirectEventName
}

// UnpackClaimApprovedDirectEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ClaimApprovedDirect(bytes32 indexed tupleKey, string namespace, string publicKey, string service)
func (iDNRegistry *IDNRegistry) UnpackClaimApprovedDirectEvent(log *types.Log) (*IDNRegistryClaimApprovedDirect, error) {
	event := "ClaimApprovedDirect"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryClaimApprovedDirect)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryClaimRejected represents a ClaimRejected event raised by the IDNRegistry contract.
type IDNRegistryClaimRejected struct {
	TupleKey [32]byte
	ClaimId  *big.Int
	Raw      *types.Log // Blockchain specific contextual infos
}

const IDNRegistryClaimRejectedEventName = "ClaimRejected"

// ContractEventName returns the user-defined event name.
func (IDNRegistryClaimRejected) ContractEventName() string {
	return IDNRegistryClaimRejectedEventName
}

// UnpackClaimRejectedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ClaimRejected(bytes32 indexed tupleKey, uint256 indexed claimId)
func (iDNRegistry *IDNRegistry) UnpackClaimRejectedEvent(log *types.Log) (*IDNRegistryClaimRejected, error) {
	event := "ClaimRejected"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryClaimRejected)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryClaimRevoked represents a ClaimRevoked event raised by the IDNRegistry contract.
type IDNRegistryClaimRevoked struct {
	TupleKey [32]byte
	ClaimId  *big.Int
	Raw      *types.Log // Blockchain specific contextual infos
}

const IDNRegistryClaimRevokedEventName = "ClaimRevoked"

// ContractEventName returns the user-defined event name.
func (IDNRegistryClaimRevoked) ContractEventName() string {
	return IDNRegistryClaimRevokedEventName
}

// UnpackClaimRevokedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ClaimRevoked(bytes32 indexed tupleKey, uint256 indexed claimId)
func (iDNRegistry *IDNRegistry) UnpackClaimRevokedEvent(log *types.Log) (*IDNRegistryClaimRevoked, error) {
	event := "ClaimRevoked"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryClaimRevoked)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryClaimRevokedDirect represents a ClaimRevokedDirect event raised by the IDNRegistry contract.
type IDNRegistryClaimRevokedDirect struct {
	TupleKey  [32]byte
	Namespace string
	PublicKey string
	Service   string
	Raw       *types.Log // Blockchain specific contextual infos
}

const IDNRegistryClaimRevokedDirectEventName = "ClaimRevokedDirect"

// ContractEventName returns the user-defined event name.
func (IDNRegistryClaimRevokedDirect) ContractEventName() string {
	return IDNRegistryClaimRevokedDirectEventName
}

// UnpackClaimRevokedDirectEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ClaimRevokedDirect(bytes32 indexed tupleKey, string namespace, string publicKey, string service)
func (iDNRegistry *IDNRegistry) UnpackClaimRevokedDirectEvent(log *types.Log) (*IDNRegistryClaimRevokedDirect, error) {
	event := "ClaimRevokedDirect"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryClaimRevokedDirect)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryClaimSubmitted represents a ClaimSubmitted event raised by the IDNRegistry contract.
type IDNRegistryClaimSubmitted struct {
	TupleKey  [32]byte
	ClaimId   *big.Int
	Namespace string
	PublicKey string
	Service   string
	Raw       *types.Log // Blockchain specific contextual infos
}

const IDNRegistryClaimSubmittedEventName = "ClaimSubmitted"

// ContractEventName returns the user-defined event name.
func (IDNRegistryClaimSubmitted) ContractEventName() string {
	return IDNRegistryClaimSubmittedEventName
}

// UnpackClaimSubmittedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ClaimSubmitted(bytes32 indexed tupleKey, uint256 indexed claimId, string namespace, string publicKey, string service)
func (iDNRegistry *IDNRegistry) UnpackClaimSubmittedEvent(log *types.Log) (*IDNRegistryClaimSubmitted, error) {
	event := "ClaimSubmitted"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryClaimSubmitted)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryNamespaceRegistered represents a NamespaceRegistered event raised by the IDNRegistry contract.
type IDNRegistryNamespaceRegistered struct {
	NameHash [32]byte
	Name     string
	Owner    common.Address
	Raw      *types.Log // Blockchain specific contextual infos
}

const IDNRegistryNamespaceRegisteredEventName = "NamespaceRegistered"

// ContractEventName returns the user-defined event name.
func (IDNRegistryNamespaceRegistered) ContractEventName() string {
	return IDNRegistryNamespaceRegisteredEventName
}

// UnpackNamespaceRegisteredEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event NamespaceRegistered(bytes32 indexed nameHash, string name, address indexed owner)
func (iDNRegistry *IDNRegistry) UnpackNamespaceRegisteredEvent(log *types.Log) (*IDNRegistryNamespaceRegistered, error) {
	event := "NamespaceRegistered"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryNamespaceRegistered)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryNamespaceTransferred represents a NamespaceTransferred event raised by the IDNRegistry contract.
type IDNRegistryNamespaceTransferred struct {
	NameHash      [32]byte
	Name          string
	PreviousOwner common.Address
	NewOwner      common.Address
	Raw           *types.Log // Blockchain specific contextual infos
}

const IDNRegistryNamespaceTransferredEventName = "NamespaceTransferred"

// ContractEventName returns the user-defined event name.
func (IDNRegistryNamespaceTransferred) ContractEventName() string {
	return IDNRegistryNamespaceTransferredEventName
}

// UnpackNamespaceTransferredEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event NamespaceTransferred(bytes32 indexed nameHash, string name, address indexed previousOwner, address indexed newOwner)
func (iDNRegistry *IDNRegistry) UnpackNamespaceTransferredEvent(log *types.Log) (*IDNRegistryNamespaceTransferred, error) {
	event := "NamespaceTransferred"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryNamespaceTransferred)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryOwnershipTransferred represents a OwnershipTransferred event raised by the IDNRegistry contract.
type IDNRegistryOwnershipTransferred struct {
	PreviousOwner common.Address
	NewOwner      common.Address
	Raw           *types.Log // Blockchain specific contextual infos
}

const IDNRegistryOwnershipTransferredEventName = "OwnershipTransferred"

// ContractEventName returns the user-defined event name.
func (IDNRegistryOwnershipTransferred) ContractEventName() string {
	return IDNRegistryOwnershipTransferredEventName
}

// UnpackOwnershipTransferredEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event OwnershipTransferred(address indexed previousOwner, address indexed newOwner)
func (iDNRegistry *IDNRegistry) UnpackOwnershipTransferredEvent(log *types.Log) (*IDNRegistryOwnershipTransferred, error) {
	event := "OwnershipTransferred"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryOwnershipTransferred)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// IDNRegistryRelayerChanged represents a RelayerChanged event raised by the IDNRegistry contract.
type IDNRegistryRelayerChanged struct {
	PreviousRelayer common.Address
	NewRelayer      common.Address
	Raw             *types.Log // Blockchain specific contextual infos
}

const IDNRegistryRelayerChangedEventName = "RelayerChanged"

// ContractEventName returns the user-defined event name.
func (IDNRegistryRelayerChanged) ContractEventName() string {
	return IDNRegistryRelayerChangedEventName
}

// UnpackRelayerChangedEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event RelayerChanged(address indexed previousRelayer, address indexed newRelayer)
func (iDNRegistry *IDNRegistry) UnpackRelayerChangedEvent(log *types.Log) (*IDNRegistryRelayerChanged, error) {
	event := "RelayerChanged"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != iDNRegistry.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(IDNRegistryRelayerChanged)
	if len(log.Data) > 0 {
		if err := iDNRegistry.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range iDNRegistry.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// UnpackError attempts to decode the provided error data using user-defined
// error definitions.
func (iDNRegistry *IDNRegistry) UnpackError(raw []byte) (any, error) {
	if bytes.Equal(raw[:4], iDNRegistry.abi.Errors["ClaimNotFound"].ID.Bytes()[:4]) {
		return iDNRegistry.UnpackClaimNotFoundError(raw[4:])
	}
	if bytes.Equal(raw[:4], iDNRegistry.abi.Errors["EmptyArgument"].ID.Bytes()[:4]) {
		return iDNRegistry.UnpackEmptyArgumentError(raw[4:])
	}
	if bytes.Equal(raw[:4], iDNRegistry.abi.Errors["InvalidClaimState"].ID.Bytes()[:4]) {
		return iDNRegistry.UnpackInvalidClaimStateError(raw[4:])
	}
	if bytes.Equal(raw[:4], iDNRegistry.abi.Errors["NamespaceNotRegistered"].ID.Bytes()[:4]) {
		return iDNRegistry.UnpackNamespaceNotRegisteredError(raw[4:])
	}
	if bytes.Equal(raw[:4], iDNRegistry.abi.Errors["NotOwner"].ID.Bytes()[:4]) {
		return iDNRegistry.UnpackNotOwnerError(raw[4:])
	}
	if bytes.Equal(raw[:4], iDNRegistry.abi.Errors["NotRelayer"].ID.Bytes()[:4]) {
		return iDNRegistry.UnpackNotRelayerError(raw[4:])
	}
	if bytes.Equal(raw[:4], iDNRegistry.abi.Errors["ZeroAddress"].ID.Bytes()[:4]) {
		return iDNRegistry.UnpackZeroAddressError(raw[4:])
	}
	return nil, errors.New("Unknown error")
}

// IDNRegistryClaimNotFound represents a ClaimNotFound error raised by the IDNRegistry contract.
type IDNRegistryClaimNotFound struct {
	ClaimId *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ClaimNotFound(uint256 claimId)
func IDNRegistryClaimNotFoundErrorID() common.Hash {
	return common.HexToHash("0x3373e4614f1d003063bfe79540fc47003ba6dd330516710f3c56d0b1511bb03c")
}

// UnpackClaimNotFoundError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ClaimNotFound(uint256 claimId)
func (iDNRegistry *IDNRegistry) UnpackClaimNotFoundError(raw []byte) (*IDNRegistryClaimNotFound, error) {
	out := new(IDNRegistryClaimNotFound)
	if err := iDNRegistry.abi.UnpackIntoInterface(out, "ClaimNotFound", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// IDNRegistryEmptyArgument represents a EmptyArgument error raised by the IDNRegistry contract.
type IDNRegistryEmptyArgument struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error EmptyArgument()
func IDNRegistryEmptyArgumentErrorID() common.Hash {
	return common.HexToHash("0x5cc8c21ed244119003cadcda1f7441eae479251e25f222d7f3e133f9bfcb0314")
}

// UnpackEmptyArgumentError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error EmptyArgument()
func (iDNRegistry *IDNRegistry) UnpackEmptyArgumentError(raw []byte) (*IDNRegistryEmptyArgument, error) {
	out := new(IDNRegistryEmptyArgument)
	if err := iDNRegistry.abi.UnpackIntoInterface(out, "EmptyArgument", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// IDNRegistryInvalidClaimState represents a InvalidClaimState error raised by the IDNRegistry contract.
type IDNRegistryInvalidClaimState struct {
	ClaimId *big.Int
	Status  uint8
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error InvalidClaimState(uint256 claimId, uint8 status)
func IDNRegistryInvalidClaimStateErrorID() common.Hash {
	return common.HexToHash("0x432a4d51fdea17cd174a0b1149a11111e3d4137826296a61f5e3a432be77b01b")
}

// UnpackInvalidClaimStateError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error InvalidClaimState(uint256 claimId, uint8 status)
func (iDNRegistry *IDNRegistry) UnpackInvalidClaimStateError(raw []byte) (*IDNRegistryInvalidClaimState, error) {
	out := new(IDNRegistryInvalidClaimState)
	if err := iDNRegistry.abi.UnpackIntoInterface(out, "InvalidClaimState", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// IDNRegistryNamespaceNotRegistered represents a NamespaceNotRegistered error raised by the IDNRegistry contract.
type IDNRegistryNamespaceNotRegistered struct {
	Name string
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error NamespaceNotRegistered(string name)
func IDNRegistryNamespaceNotRegisteredErrorID() common.Hash {
	return common.HexToHash("0x2670c458a7b3620eb6892115c7703e3a2b19081ad773980ae0bb65f7be248d2c")
}

// UnpackNamespaceNotRegisteredError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error NamespaceNotRegistered(string name)
func (iDNRegistry *IDNRegistry) UnpackNamespaceNotRegisteredError(raw []byte) (*IDNRegistryNamespaceNotRegistered, error) {
	out := new(IDNRegistryNamespaceNotRegistered)
	if err := iDNRegistry.abi.UnpackIntoInterface(out, "NamespaceNotRegistered", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// IDNRegistryNotOwner represents a NotOwner error raised by the IDNRegistry contract.
type IDNRegistryNotOwner struct {
	Sender common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error NotOwner(address sender)
func IDNRegistryNotOwnerErrorID() common.Hash {
	return common.HexToHash("0x245aecd3fabbd17d6c3c92dc7f0ab916ea8cbf6fc1862c8b56893090ac3fff4c")
}

// UnpackNotOwnerError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error NotOwner(address sender)
func (iDNRegistry *IDNRegistry) UnpackNotOwnerError(raw []byte) (*IDNRegistryNotOwner, error) {
	out := new(IDNRegistryNotOwner)
	if err := iDNRegistry.abi.UnpackIntoInterface(out, "NotOwner", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// IDNRegistryNotRelayer represents a NotRelayer error raised by the IDNRegistry contract.
type IDNRegistryNotRelayer struct {
	Sender common.Address
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error NotRelayer(address sender)
func IDNRegistryNotRelayerErrorID() common.Hash {
	return common.HexToHash("0x366b2e5a6ef7a1142bf5af5b5b0034d25a76775bdac9ac62ed19327043788dac")
}

// UnpackNotRelayerError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error NotRelayer(address sender)
func (iDNRegistry *IDNRegistry) UnpackNotRelayerError(raw []byte) (*IDNRegistryNotRelayer, error) {
	out := new(IDNRegistryNotRelayer)
	if err := iDNRegistry.abi.UnpackIntoInterface(out, "NotRelayer", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// IDNRegistryZeroAddress represents a ZeroAddress error raised by the IDNRegistry contract.
type IDNRegistryZeroAddress struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ZeroAddress()
func IDNRegistryZeroAddressErrorID() common.Hash {
	return common.HexToHash("0xd92e233df2717d4a40030e20904abd27b68fcbeede117eaaccbbdac9618c8c73")
}

// UnpackZeroAddressError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ZeroAddress()
func (iDNRegistry *IDNRegistry) UnpackZeroAddressError(raw []byte) (*IDNRegistryZeroAddress, error) {
	out := new(IDNRegistryZeroAddress)
	if err := iDNRegistry.abi.UnpackIntoInterface(out, "ZeroAddress", raw); err != nil {
		return nil, err
	}
	return out, nil
}
