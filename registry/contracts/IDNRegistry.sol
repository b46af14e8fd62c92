// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

/// @title IDNRegistry
/// @notice The on-chain record of idn namespaces and of the agent keys their
/// owners authorised for a service. The control plane is the authority: only
/// its relayer account writes, and the owner of the contract may replace the
/// relayer. Every write that changes state emits one event. Everything
/// written here is public for ever, so no personal data is: a claim is its
/// namespace, public key and service, never the agent's address or any
/// other detail the service reported.
/// @dev A control plane may repeat a write after a crash between the chain
/// accepting it and the control plane recording it. So a write that finds the
/// registry already in the state it asks for succeeds without a change and
/// without an event: registering a registered namespace, approving an
/// authorised tuple, revoking an unauthorised one, moving a two-step claim to
/// the state it already has. `authorization` and `namespaceOf` return the
/// block of the last change, where the event of that change can be found.
contract IDNRegistry {
    enum ClaimStatus {
        None,
        Pending,
        Approved,
        Rejected,
        Revoked
    }

    struct Authorization {
        bool authorized;
        uint64 changedAt; // block number of the last change
    }

    struct Namespace {
        address owner;
        uint64 registeredAt; // block number
    }

    struct Claim {
        bytes32 tupleKey;
        ClaimStatus status;
    }

    address public owner;
    address public relayer;
    uint256 public claimCount;

    mapping(bytes32 => Namespace) private namespaces; // keccak256(name)
    mapping(bytes32 => Authorization) private authorizations; // tupleKey
    mapping(uint256 => Claim) private claims; // two-step claims, ids from 1

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event RelayerChanged(address indexed previousRelayer, address indexed newRelayer);
    event NamespaceRegistered(bytes32 indexed nameHash, string name, address indexed owner);
    event NamespaceTransferred(
        bytes32 indexed nameHash, string name, address indexed previousOwner, address indexed newOwner
    );
    event ClaimSubmitted(
        bytes32 indexed tupleKey, uint256 indexed claimId, string namespace, string publicKey, string service
    );
    event ClaimApproved(bytes32 indexed tupleKey, uint256 indexed claimId);
    event ClaimRejected(bytes32 indexed tupleKey, uint256 indexed claimId);
    event ClaimRevoked(bytes32 indexed tupleKey, uint256 indexed claimId);
    event ClaimApprovedDirect(bytes32 indexed tupleKey, string namespace, string publicKey, string service);
    event ClaimRevokedDirect(bytes32 indexed tupleKey, string namespace, string publicKey, string service);

    error NotOwner(address sender);
    error NotRelayer(address sender);
    error ZeroAddress();
    error EmptyArgument();
    error NamespaceNotRegistered(string name);
    error ClaimNotFound(uint256 claimId);
    error InvalidClaimState(uint256 claimId, ClaimStatus status);

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    modifier onlyRelayer() {
        if (msg.sender != relayer) revert NotRelayer(msg.sender);
        _;
    }

    /// @param relayer_ the account allowed to write; the deployer when zero.
    constructor(address relayer_) {
        if (relayer_ == address(0)) relayer_ = msg.sender;
        owner = msg.sender;
        relayer = relayer_;
        emit OwnershipTransferred(address(0), msg.sender);
        emit RelayerChanged(address(0), relayer_);
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert ZeroAddress();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function setRelayer(address newRelayer) external onlyOwner {
        if (newRelayer == address(0)) revert ZeroAddress();
        emit RelayerChanged(relayer, newRelayer);
        relayer = newRelayer;
    }

    /// @notice The key of a (namespace, public key, service) tuple.
    function tupleKey(string calldata namespace, string calldata publicKey, string calldata service)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(namespace, publicKey, service));
    }

    /// @notice Records a namespace, owned by the relayer until transferred.
    function registerNamespace(string calldata name) external onlyRelayer {
        if (bytes(name).length == 0) revert EmptyArgument();
        bytes32 h = keccak256(bytes(name));
        if (namespaces[h].owner != address(0)) return;
        namespaces[h] = Namespace(msg.sender, uint64(block.number));
        emit NamespaceRegistered(h, name, msg.sender);
    }

    function transferNamespace(string calldata name, address newOwner) external onlyRelayer {
        if (newOwner == address(0)) revert ZeroAddress();
        bytes32 h = keccak256(bytes(name));
        Namespace storage ns = namespaces[h];
        if (ns.owner == address(0)) revert NamespaceNotRegistered(name);
        if (ns.owner == newOwner) return;
        emit NamespaceTransferred(h, name, ns.owner, newOwner);
        ns.owner = newOwner;
    }

    /// @return nsOwner the namespace's owner, zero when not registered
    /// @return registeredAt the block of its registration
    function namespaceOf(string calldata name) external view returns (address nsOwner, uint64 registeredAt) {
        Namespace storage ns = namespaces[keccak256(bytes(name))];
        return (ns.owner, ns.registeredAt);
    }

    /// @notice Opens a two-step claim; approveClaim, rejectClaim and
    /// revokeClaim move it.
    function submitClaim(string calldata namespace, string calldata publicKey, string calldata service)
        external
        onlyRelayer
        returns (uint256 claimId)
    {
        bytes32 key = _key(namespace, publicKey, service);
        claimId = ++claimCount;
        claims[claimId] = Claim(key, ClaimStatus.Pending);
        emit ClaimSubmitted(key, claimId, namespace, publicKey, service);
    }

    function approveClaim(uint256 claimId) external onlyRelayer {
        Claim storage c = _move(claimId, ClaimStatus.Pending, ClaimStatus.Approved);
        if (c.status == ClaimStatus.Approved) return;
        c.status = ClaimStatus.Approved;
        _authorize(c.tupleKey, true);
        emit ClaimApproved(c.tupleKey, claimId);
    }

    function rejectClaim(uint256 claimId) external onlyRelayer {
        Claim storage c = _move(claimId, ClaimStatus.Pending, ClaimStatus.Rejected);
        if (c.status == ClaimStatus.Rejected) return;
        c.status = ClaimStatus.Rejected;
        emit ClaimRejected(c.tupleKey, claimId);
    }

    function revokeClaim(uint256 claimId) external onlyRelayer {
        Claim storage c = _move(claimId, ClaimStatus.Approved, ClaimStatus.Revoked);
        if (c.status == ClaimStatus.Revoked) return;
        c.status = ClaimStatus.Revoked;
        _authorize(c.tupleKey, false);
        emit ClaimRevoked(c.tupleKey, claimId);
    }

    function claimOf(uint256 claimId) external view returns (bytes32 key, ClaimStatus status) {
        Claim storage c = claims[claimId];
        return (c.tupleKey, c.status);
    }

    /// @notice Authorises a tuple in one step.
    function approveClaimDirect(string calldata namespace, string calldata publicKey, string calldata service)
        external
        onlyRelayer
    {
        bytes32 key = _key(namespace, publicKey, service);
        if (authorizations[key].authorized) return;
        _authorize(key, true);
        emit ClaimApprovedDirect(key, namespace, publicKey, service);
    }

    /// @notice Withdraws a tuple's authorisation in one step.
    function revokeClaimDirect(string calldata namespace, string calldata publicKey, string calldata service)
        external
        onlyRelayer
    {
        bytes32 key = _key(namespace, publicKey, service);
        if (!authorizations[key].authorized) return;
        _authorize(key, false);
        emit ClaimRevokedDirect(key, namespace, publicKey, service);
    }

    function isAuthorized(string calldata namespace, string calldata publicKey, string calldata service)
        external
        view
        returns (bool)
    {
        return authorizations[tupleKey(namespace, publicKey, service)].authorized;
    }

    /// @return authorized whether the tuple is authorised
    /// @return changedAt the block of the last change, zero when never changed
    function authorization(string calldata namespace, string calldata publicKey, string calldata service)
        external
        view
        returns (bool authorized, uint64 changedAt)
    {
        Authorization storage a = authorizations[tupleKey(namespace, publicKey, service)];
        return (a.authorized, a.changedAt);
    }

    function _key(string calldata namespace, string calldata publicKey, string calldata service)
        private
        pure
        returns (bytes32)
    {
        if (bytes(namespace).length == 0 || bytes(publicKey).length == 0 || bytes(service).length == 0) {
            revert EmptyArgument();
        }
        return tupleKey(namespace, publicKey, service);
    }

    function _authorize(bytes32 key, bool authorized) private {
        authorizations[key] = Authorization(authorized, uint64(block.number));
    }

    /// @dev Returns the claim if it is in `from` or already in `to`.
    function _move(uint256 claimId, ClaimStatus from, ClaimStatus to) private view returns (Claim storage c) {
        c = claims[claimId];
        if (c.status == ClaimStatus.None) revert ClaimNotFound(claimId);
        if (c.status != from && c.status != to) revert InvalidClaimState(claimId, c.status);
    }
}
