package credvault

import "github.com/idnhq/idn/approval"

// Approvals returns the connection's approval rules (approval_tools,
// approval_routes, approval_subjects) as one policy, built once per
// snapshot so a call's check folds no subject key.
func (r *Resolved) Approvals() *approval.Policy {
	if r.approvals != nil {
		return r.approvals
	}
	if r.Connection == nil {
		return &approval.Policy{}
	}
	return approvalPolicy(r.Connection)
}

func approvalPolicy(c *Connection) *approval.Policy {
	return approval.NewPolicy(approval.Rules{Tools: c.ApprovalTools, Routes: c.ApprovalRoutes}, c.ApprovalSubjects)
}
