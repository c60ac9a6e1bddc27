// The -o values of the listing commands (status, skew, history, validate), as kubectl names them;
// apart from ./listing.ts so that the argument parser loads nothing else.
export const LIST_FORMATS = ['table', 'wide', 'name', 'json', 'yaml'] as const;
export type ListFormat = (typeof LIST_FORMATS)[number];
