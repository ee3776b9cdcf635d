/** The error codes of decisions §21 that no other capability answers (made by the shared factory). */
import { ApiError } from "../platform/Errors.ts"

/** No notice (or notice version) of the developer's with that id (400, as published). */
export class InvalidNotice extends ApiError<InvalidNotice>()("INVALID_NOTICE", 400) {}
/** A grievance's recordId that is not the developer's record for the same principal (400, no oracle). */
export class InvalidRecord extends ApiError<InvalidRecord>()("INVALID_RECORD", 400) {}
export class AlreadyWithdrawn extends ApiError<AlreadyWithdrawn>()("ALREADY_WITHDRAWN", 409) {}
export class NoticeRetired extends ApiError<NoticeRetired>()("NOTICE_RETIRED", 409) {}
export class TooManyOpenGrievances extends ApiError<TooManyOpenGrievances>()("TOO_MANY_OPEN_GRIEVANCES", 409) {}
export class NoticeHashMismatch extends ApiError<NoticeHashMismatch>()("NOTICE_HASH_MISMATCH", 422) {}
export class VerifiableConsentRequired extends ApiError<VerifiableConsentRequired>()("VERIFIABLE_CONSENT_REQUIRED", 422) {}
/** A notice that lacks what Rule 3 asks, while the developer's requireCompleteNotices setting is on (422). */
export class NoticeIncomplete extends ApiError<NoticeIncomplete>()("NOTICE_INCOMPLETE", 422) {}
