//! Conditional writes that DynamoDB refused, told apart from every other failure in one place.
//!
//! A refused condition is an answer, not a failure (a newer fact is stored, the lease is held
//! elsewhere, the claim exists already), so callers turn it into an `Ok`; anything else is the
//! table unavailable. DynamoDB says "refused" in two ways: a single-item write fails with
//! `ConditionalCheckFailedException`, a transaction is cancelled with `ConditionalCheckFailed`
//! among its per-item reasons (docs/aws-semantics.md §3).

use super::{unavailable, Item, StoreError};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::error::{
    ConditionalCheckFailedException, TransactionCanceledException,
};
use aws_sdk_dynamodb::types::CancellationReason;

/// The cancellation reason code of a transaction item whose condition was refused (the
/// single-item operations name the same refusal `ConditionalCheckFailedException`).
const REFUSED_REASON: &str = "ConditionalCheckFailed";

/// The error of a conditional write.
pub(crate) trait ConditionalWriteError {
    /// What DynamoDB tells with a refusal: for a single-item write the exception, which holds
    /// the stored item when the write asked for `ReturnValuesOnConditionCheckFailure`; for a
    /// transaction, which of its items were refused.
    type Refused;

    /// `Ok` when DynamoDB refused the write's condition; the table unavailable for any other
    /// failure, timeouts and throttling included.
    fn refused_or_unavailable(self) -> Result<Self::Refused, StoreError>;
}

macro_rules! single_item_writes {
    ($($operation_error:ident),+) => {$(
        impl<R> ConditionalWriteError for SdkError<$operation_error, R>
        where
            R: std::fmt::Debug + Send + Sync + 'static,
        {
            type Refused = ConditionalCheckFailedException;

            fn refused_or_unavailable(self) -> Result<Self::Refused, StoreError> {
                match self.into_service_error() {
                    $operation_error::ConditionalCheckFailedException(refused) => Ok(refused),
                    conflict @ $operation_error::TransactionConflictException(_) => {
                        Err(StoreError::conflict("table", conflict))
                    }
                    other => Err(unavailable(other)),
                }
            }
        }
    )+};
}

single_item_writes!(UpdateItemError, PutItemError, DeleteItemError);

impl<R> ConditionalWriteError for SdkError<TransactWriteItemsError, R>
where
    R: std::fmt::Debug + Send + Sync + 'static,
{
    type Refused = RefusedTransaction;

    /// A transaction cancelled for other reasons only is unavailable; one cancelled for a
    /// conflict with another write of one of its items says so (`StoreError::is_conflict`).
    fn refused_or_unavailable(self) -> Result<RefusedTransaction, StoreError> {
        match self.into_service_error() {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                match first_refused_item(cancelled.cancellation_reasons()) {
                    Some(first_refused) => Ok(RefusedTransaction {
                        cancelled,
                        first_refused,
                    }),
                    None if cancelled.cancellation_reasons().iter().any(is_conflict) => {
                        Err(StoreError::conflict(
                            "table",
                            TransactWriteItemsError::TransactionCanceledException(cancelled),
                        ))
                    }
                    None => Err(unavailable(
                        TransactWriteItemsError::TransactionCanceledException(cancelled),
                    )),
                }
            }
            other => Err(unavailable(other)),
        }
    }
}

/// A transaction DynamoDB cancelled because the condition of at least one of its items was
/// refused. Items are numbered as they were sent.
#[derive(Debug)]
pub(crate) struct RefusedTransaction {
    cancelled: TransactionCanceledException,
    first_refused: usize,
}

impl RefusedTransaction {
    /// The first item whose condition was refused; DynamoDB may report several.
    pub(crate) fn first_refused_item(&self) -> usize {
        self.first_refused
    }

    pub(crate) fn refused_item(&self, index: usize) -> bool {
        self.cancelled
            .cancellation_reasons()
            .get(index)
            .is_some_and(is_refused)
    }

    /// Item `index` as stored when its condition was refused, if that item asked for it
    /// (`ReturnValuesOnConditionCheckFailure`).
    pub(crate) fn stored_item(&self, index: usize) -> Option<&Item> {
        self.cancelled.cancellation_reasons().get(index)?.item()
    }

    /// A refusal the caller cannot answer (not the item it tells by) is the table unavailable,
    /// with the cancellation as DynamoDB reported it.
    pub(crate) fn into_unavailable(self) -> StoreError {
        unavailable(TransactWriteItemsError::TransactionCanceledException(
            self.cancelled,
        ))
    }
}

fn is_refused(reason: &CancellationReason) -> bool {
    reason.code() == Some(REFUSED_REASON)
}

/// The reason code of a transaction item another write of the same item held at that moment.
const CONFLICT_REASON: &str = "TransactionConflict";

fn is_conflict(reason: &CancellationReason) -> bool {
    reason.code() == Some(CONFLICT_REASON)
}

/// The first item whose condition was refused, from a cancellation's per-item reasons (one per
/// item sent, `None` for the items that were not at fault).
fn first_refused_item(reasons: &[CancellationReason]) -> Option<usize> {
    reasons.iter().position(is_refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::types::error::ThrottlingException;
    use aws_sdk_dynamodb::types::AttributeValue;

    /// The raw response plays no part in telling a refusal apart.
    type Raw = ();

    fn reason(code: &str) -> CancellationReason {
        CancellationReason::builder().code(code).build()
    }

    fn cancelled_transaction(
        reasons: Vec<CancellationReason>,
    ) -> SdkError<TransactWriteItemsError, Raw> {
        SdkError::service_error(
            TransactWriteItemsError::TransactionCanceledException(
                TransactionCanceledException::builder()
                    .message("Transaction cancelled")
                    .set_cancellation_reasons(Some(reasons))
                    .build(),
            ),
            (),
        )
    }

    fn stored(attribute: &str, value: &str) -> Item {
        Item::from([(attribute.to_owned(), AttributeValue::S(value.to_owned()))])
    }

    #[test]
    fn a_refused_update_is_answered_with_the_item_it_found() {
        let refused = SdkError::<UpdateItemError, Raw>::service_error(
            UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .message("The conditional request failed")
                    .set_item(Some(stored("holder", "other")))
                    .build(),
            ),
            (),
        );
        let refused = refused.refused_or_unavailable().expect("a refusal");
        assert_eq!(refused.item(), Some(&stored("holder", "other")));
    }

    #[test]
    fn a_refused_put_and_a_refused_delete_are_refusals_too() {
        let put = SdkError::<PutItemError, Raw>::service_error(
            PutItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder().build(),
            ),
            (),
        );
        let delete = SdkError::<DeleteItemError, Raw>::service_error(
            DeleteItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder().build(),
            ),
            (),
        );
        assert!(put.refused_or_unavailable().is_ok());
        assert!(delete.refused_or_unavailable().is_ok());
    }

    #[test]
    fn a_throttled_write_is_the_table_unavailable() {
        let throttled = SdkError::<UpdateItemError, Raw>::service_error(
            UpdateItemError::ThrottlingException(
                ThrottlingException::builder()
                    .message("Rate exceeded")
                    .build(),
            ),
            (),
        );
        let error = throttled.refused_or_unavailable().expect_err("unavailable");
        assert_eq!(error.what, "table");
        assert_eq!(
            error.to_string(),
            "table unavailable: ThrottlingException: Rate exceeded"
        );
    }

    #[test]
    fn a_write_that_timed_out_is_the_table_unavailable() {
        let timed_out = SdkError::<PutItemError, Raw>::timeout_error("no answer in time");
        let error = timed_out.refused_or_unavailable().expect_err("unavailable");
        assert_eq!(error.what, "table");
    }

    #[test]
    fn an_error_the_sdk_does_not_model_is_the_table_unavailable() {
        let unmodelled = SdkError::<UpdateItemError, Raw>::service_error(
            UpdateItemError::generic(ErrorMetadata::builder().code("ValidationException").build()),
            (),
        );
        assert!(unmodelled.refused_or_unavailable().is_err());
    }

    #[test]
    fn a_transaction_refused_on_its_second_item_names_that_item() {
        let cancelled =
            cancelled_transaction(vec![reason("None"), reason(REFUSED_REASON), reason("None")]);
        let refused = cancelled.refused_or_unavailable().expect("a refusal");
        assert_eq!(refused.first_refused_item(), 1);
        assert!(refused.refused_item(1));
        assert!(!refused.refused_item(0));
        assert!(!refused.refused_item(3));
    }

    #[test]
    fn a_transaction_refused_on_several_items_names_the_first_and_knows_the_others() {
        let cancelled = cancelled_transaction(vec![
            reason("None"),
            reason(REFUSED_REASON),
            reason(REFUSED_REASON),
        ]);
        let refused = cancelled.refused_or_unavailable().expect("a refusal");
        assert_eq!(refused.first_refused_item(), 1);
        assert!(refused.refused_item(2));
    }

    #[test]
    fn a_refused_transaction_item_keeps_the_item_it_found() {
        let claim = CancellationReason::builder()
            .code(REFUSED_REASON)
            .set_item(Some(stored("counted_at_ms", "7")))
            .build();
        let cancelled = cancelled_transaction(vec![claim, reason("None")]);
        let refused = cancelled.refused_or_unavailable().expect("a refusal");
        assert_eq!(refused.stored_item(0), Some(&stored("counted_at_ms", "7")));
        assert_eq!(refused.stored_item(1), None);
    }

    #[test]
    fn a_transaction_cancelled_for_a_conflict_only_is_the_table_unavailable_and_says_so() {
        let cancelled = cancelled_transaction(vec![reason("None"), reason(CONFLICT_REASON)]);
        let error = cancelled.refused_or_unavailable().expect_err("unavailable");
        assert_eq!(error.what, "table");
        assert!(error.is_conflict());
        assert!(error.to_string().contains("Transaction cancelled"));
        let throttled = cancelled_transaction(vec![reason("None"), reason("ThrottlingError")]);
        let error = throttled.refused_or_unavailable().expect_err("unavailable");
        assert!(!error.is_conflict(), "a throttled item is no conflict");
    }

    #[test]
    fn a_refusal_the_caller_cannot_answer_reports_the_cancellation() {
        let cancelled = cancelled_transaction(vec![reason(REFUSED_REASON)]);
        let refused = cancelled.refused_or_unavailable().expect("a refusal");
        let error = refused.into_unavailable();
        assert_eq!(error.what, "table");
        assert!(error.to_string().contains("Transaction cancelled"));
    }

    #[test]
    fn reasons_without_a_refusal_name_no_item() {
        assert_eq!(first_refused_item(&[]), None);
        assert_eq!(
            first_refused_item(&[reason("None"), reason("ThrottlingError")]),
            None
        );
        assert_eq!(first_refused_item(&[reason(REFUSED_REASON)]), Some(0));
    }
}
